/** Less time than this left once a turn comes: the task is not started. */
const MIN_TASK_MS = 100;

/**
 * At most `perKey` tasks at once per key (a tenant's DNS lookups at registration, in this
 * process); a task past it waits for a turn. `run` hands the task what is left of `budgetMs`
 * once it starts, or calls `onExpired` when the budget ran out while it waited.
 */
export class LookupGate {
  private readonly keys = new Map<string, { running: number; waiting: (() => void)[] }>();

  constructor(private readonly perKey: number) {}

  async run<T>(key: string, budgetMs: number, task: (remainingMs: number) => Promise<T>, onExpired: () => T): Promise<T> {
    const deadline = Date.now() + budgetMs;
    const k = this.keys.get(key) ?? { running: 0, waiting: [] };
    this.keys.set(key, k);
    if (k.running >= this.perKey) {
      const turn = await new Promise<boolean>((resolve) => {
        const take = () => {
          clearTimeout(timer);
          resolve(true);
        };
        const timer = setTimeout(() => {
          k.waiting.splice(k.waiting.indexOf(take), 1);
          resolve(false);
        }, budgetMs);
        k.waiting.push(take);
      });
      if (!turn) {
        this.forget(key, k);
        return onExpired();
      }
      // the finished task handed its place over: `running` already counts this one
    } else k.running++;
    try {
      const remaining = deadline - Date.now();
      // a turn that came too late for a lookup to answer in time
      if (remaining < MIN_TASK_MS) return onExpired();
      return await task(remaining);
    } finally {
      const next = k.waiting.shift();
      if (next) next();
      else {
        k.running--;
        this.forget(key, k);
      }
    }
  }

  /** Tasks running for `key` (for tests). */
  running(key: string): number {
    return this.keys.get(key)?.running ?? 0;
  }

  private forget(key: string, k: { running: number; waiting: unknown[] }): void {
    if (!k.running && !k.waiting.length && this.keys.get(key) === k) this.keys.delete(key);
  }
}
