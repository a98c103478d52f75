import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

/**
 * Benchmark aid, off unless `dir` (config `CPU_PROFILE_DIR`) is set: SIGUSR2 starts a V8 CPU profile of this
 * process and the next SIGUSR2 writes it to `<dir>/<pid>-<n>.cpuprofile` (Chrome DevTools
 * format). `npm run bench` with `BENCH_CPU_PROFILE=<dir>` signals the API processes around each
 * measured run, so a profile holds that run only, not the set-up.
 */
export function installCpuProfileToggle(dir: string | undefined): void {
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  const session = new Session();
  session.connect();
  let running = false;
  let n = 0;
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      session.post('Profiler.enable', () => session.post('Profiler.start'));
      return;
    }
    running = false;
    session.post('Profiler.stop', (err, res) => {
      if (!err) writeFileSync(join(dir, `${process.pid}-${++n}.cpuprofile`), JSON.stringify(res.profile));
    });
  });
}
