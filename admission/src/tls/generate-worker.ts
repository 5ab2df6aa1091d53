/** Worker thread body for generateInWorker: one generation, posted back, then the thread ends. */
import { parentPort, workerData } from 'node:worker_threads';
import { generateCertificates, type GenerateRequest } from './certificate-generator.js';

try {
  parentPort!.postMessage({ ok: generateCertificates(workerData as GenerateRequest) });
} catch (e) {
  parentPort!.postMessage({ error: e instanceof Error ? e.message : String(e) });
}
