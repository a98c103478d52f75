/** The part of node:cluster the supervisor uses (a fake in tests). */
export interface ClusterLike {
  fork(): { process: { pid?: number } };
  on(event: 'exit', listener: (worker: { process: { pid?: number } }, code: number, signal: string) => void): unknown;
  readonly workers?: Record<string, { kill(signal?: string): void } | undefined>;
}

export interface SupervisorOptions {
  /** a process that lived at least this long is replaced at once, and the backoff starts over */
  healthyAfterMs: number;
  /** the first delay after an early exit; each further early exit in a row doubles it */
  initialDelayMs: number;
  maxDelayMs: number;
  log: (line: string) => void;
  now?: () => number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

export const DEFAULT_SUPERVISOR_OPTIONS: Omit<SupervisorOptions, 'log'> = { healthyAfterMs: 10_000, initialDelayMs: 500, maxDelayMs: 30_000 };

/**
 * `API_WORKERS=N`: the primary forks N API processes on one port and replaces any that exits. A
 * process that exits soon after its start (PostgreSQL unreachable at boot, a bad deployment) is
 * replaced after a delay that doubles with each such exit in a row (up to `maxDelayMs`), so a
 * failing start never becomes a tight fork loop that burns the host's CPU and floods the log; one
 * that ran for `healthyAfterMs` is replaced at once. SIGINT and SIGTERM go to every process, and
 * nothing is replaced after them. Returns the signal handler (for tests).
 */
export function superviseApiProcesses(cluster: ClusterLike, count: number, opts: SupervisorOptions): (signal: 'SIGINT' | 'SIGTERM') => void {
  const now = opts.now ?? Date.now;
  // a referenced timer: with every API process down, it is what keeps the primary alive
  const setTimer = opts.setTimer ?? ((fn: () => void, ms: number) => setTimeout(fn, ms));
  const clearTimer = opts.clearTimer ?? ((h: unknown) => clearTimeout(h as NodeJS.Timeout));
  const pending = new Set<unknown>();
  const startedAt = new Map<number | undefined, number>();
  let shuttingDown = false;
  let earlyExits = 0;
  let lastEarlyExit = -Infinity;
  const fork = () => {
    if (shuttingDown) return;
    const w = cluster.fork();
    startedAt.set(w.process.pid, now());
  };
  for (let i = 0; i < count; i++) fork();
  cluster.on('exit', (worker, code, signal) => {
    const lived = now() - (startedAt.get(worker.process.pid) ?? now());
    startedAt.delete(worker.process.pid);
    if (shuttingDown) return;
    if (lived >= opts.healthyAfterMs) {
      earlyExits = 0;
      opts.log(`api process ${worker.process.pid} exited (${signal ?? code}) after ${Math.round(lived / 1000)} s; starting another`);
      fork();
      return;
    }
    // a run of early exits ends once the processes have stayed up for a while
    if (now() - lastEarlyExit > opts.healthyAfterMs + opts.maxDelayMs) earlyExits = 0;
    lastEarlyExit = now();
    const delay = Math.min(opts.maxDelayMs, opts.initialDelayMs * 2 ** earlyExits);
    earlyExits++;
    opts.log(`api process ${worker.process.pid} exited (${signal ?? code}) ${lived} ms after its start; starting another in ${delay} ms`);
    const handle = setTimer(() => {
      pending.delete(handle);
      fork();
    }, delay);
    pending.add(handle);
  });
  return (signal) => {
    shuttingDown = true;
    for (const h of pending) clearTimer(h);
    pending.clear();
    for (const w of Object.values(cluster.workers ?? {})) w?.kill(signal);
  };
}
