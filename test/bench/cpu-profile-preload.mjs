/**
 * `--cpu-prof` is not allowed in NODE_OPTIONS on Node 20, and the admission service is started by a
 * helper the benchmark does not control; so `npm run bench -- --cpu-prof` preloads this module instead
 * (NODE_OPTIONS=--import=...). It starts the V8 profiler on SIGUSR2 (the benchmark sends it when the
 * load begins, so start-up stays out of the profile) and writes the profile, in the format of
 * `--cpu-prof`, to $KD_BENCH_CPU_PROF_DIR when the process exits.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.KD_BENCH_CPU_PROF_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 1000 });
  let started = false;
  process.on('SIGUSR2', () => {
    if (!started) session.post('Profiler.start');
    started = true;
  });
  process.once('exit', () => {
    if (!started) return;
    // A session on the main thread answers synchronously, so this completes before the process ends.
    session.post('Profiler.stop', (err, res) => {
      if (!err) writeFileSync(join(dir, `CPU.${process.pid}.cpuprofile`), JSON.stringify(res.profile));
    });
  });
}
