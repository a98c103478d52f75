import { EventEmitter } from 'node:events';
import { superviseApiProcesses } from './api-cluster';

/** A fake node:cluster: fork() makes a worker with the next pid; exit(pid) emits its 'exit'. */
function fakeCluster() {
  const events = new EventEmitter();
  let pid = 100;
  const forks: number[] = [];
  const workers: Record<string, { kill: jest.Mock }> = {};
  return {
    forks,
    workers,
    fork() {
      const p = ++pid;
      forks.push(p);
      workers[p] = { kill: jest.fn() };
      return { process: { pid: p } };
    },
    on(event: 'exit', listener: (worker: { process: { pid?: number } }, code: number, signal: string) => void) {
      events.on(event, listener);
      return this;
    },
    exit(p: number, code = 1) {
      delete workers[p];
      events.emit('exit', { process: { pid: p } }, code, null);
    },
  };
}

describe('superviseApiProcesses (API_WORKERS > 1)', () => {
  let clock: number;
  let timers: { fn: () => void; at: number; h: number }[];
  const opts = () => ({
    healthyAfterMs: 10_000,
    initialDelayMs: 500,
    maxDelayMs: 4_000,
    log: jest.fn(),
    now: () => clock,
    setTimer: (fn: () => void, ms: number) => {
      const h = timers.length + 1;
      timers.push({ fn, at: clock + ms, h });
      return h;
    },
    clearTimer: (h: unknown) => {
      timers = timers.filter((t) => t.h !== h);
    },
  });
  /** moves the clock and runs the timers that are due */
  const advance = (ms: number) => {
    clock += ms;
    const due = timers.filter((t) => t.at <= clock);
    timers = timers.filter((t) => t.at > clock);
    due.forEach((t) => t.fn());
  };
  beforeEach(() => {
    clock = 1_000_000;
    timers = [];
  });

  it('starts N processes and replaces one that ran a while at once', () => {
    const c = fakeCluster();
    superviseApiProcesses(c, 2, opts());
    expect(c.forks).toHaveLength(2);
    advance(60_000);
    c.exit(c.forks[0]);
    expect(c.forks).toHaveLength(3);
    expect(timers).toHaveLength(0);
  });

  it('replaces processes that die at start after a doubling delay, capped, never in a tight loop', () => {
    const c = fakeCluster();
    const o = opts();
    superviseApiProcesses(c, 1, o);
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      c.exit(c.forks[c.forks.length - 1]);
      // nothing is forked in the same instant
      expect(c.forks).toHaveLength(i + 1);
      delays.push(timers[0].at - clock);
      advance(timers[0].at - clock);
      expect(c.forks).toHaveLength(i + 2);
    }
    expect(delays).toEqual([500, 1000, 2000, 4000, 4000, 4000]);
    expect(o.log).toHaveBeenLastCalledWith(expect.stringContaining('starting another in 4000 ms'));
  });

  it('starts the backoff over once a replacement has stayed up', () => {
    const c = fakeCluster();
    superviseApiProcesses(c, 1, opts());
    for (let i = 0; i < 3; i++) {
      c.exit(c.forks[c.forks.length - 1]);
      advance(timers[0].at - clock);
    }
    advance(60_000);
    c.exit(c.forks[c.forks.length - 1]); // lived a minute: replaced at once
    expect(timers).toHaveLength(0);
    c.exit(c.forks[c.forks.length - 1]); // then dies at start: the first delay again
    expect(timers[0].at - clock).toBe(500);
  });

  it('on SIGTERM signals every process, cancels a pending replacement and starts no other', () => {
    const c = fakeCluster();
    const stop = superviseApiProcesses(c, 2, opts());
    c.exit(c.forks[0]);
    expect(timers).toHaveLength(1);
    const alive = Object.values(c.workers);
    stop('SIGTERM');
    expect(timers).toHaveLength(0);
    for (const w of alive) expect(w.kill).toHaveBeenCalledWith('SIGTERM');
    c.exit(c.forks[1], 0);
    advance(60_000);
    expect(c.forks).toHaveLength(2);
  });
});
