import net from 'node:net';

/** A port that was free on 127.0.0.1 a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => ok(port));
    });
  });
}

/** Polls probe every intervalMs until it returns true; fails early if the watched process exits. */
export async function waitFor(
  what: string,
  timeoutMs: number,
  probe: () => Promise<boolean>,
  alive?: { exitCode: number | null; signalCode?: NodeJS.Signals | null },
  intervalMs = 100,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    if (alive && (alive.exitCode !== null || alive.signalCode)) {
      throw new Error(`${what}: process exited (${alive.exitCode ?? alive.signalCode}) before it was ready`);
    }
    try {
      if (await probe()) return;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() > end) {
      const why = lastError instanceof Error ? `: ${lastError.message}` : '';
      throw new Error(`${what}: not ready after ${timeoutMs} ms${why}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
