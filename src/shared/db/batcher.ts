import { Logger } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { metricsRegistry } from '../http/metrics-registry';

const statements = new Counter({
  name: 'db_batch_statements_total',
  help: 'Statements run by a write batcher, by batcher and kind (single, batch, retry: an item retried alone after its batch failed)',
  labelNames: ['batcher', 'kind'] as const,
  registers: [metricsRegistry],
});
const items = new Counter({
  name: 'db_batch_items_total',
  help: 'Calls served by a write batcher',
  labelNames: ['batcher'] as const,
  registers: [metricsRegistry],
});

/** Every batcher of this process, for the queue-depth gauge (read at scrape time only). */
const live = new Set<{ readonly name: string; readonly queued: number }>();
new Gauge({
  name: 'db_batch_queued',
  help: 'Calls waiting for a statement slot of a write batcher (this process, at scrape time)',
  labelNames: ['batcher'] as const,
  registers: [metricsRegistry],
  collect() {
    this.reset();
    for (const b of live) this.inc({ batcher: b.name }, b.queued);
  },
});

interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (reason: unknown) => void;
}

export interface BatcherOptions {
  /** the `batcher` label of the db_batch_* metrics */
  name: string;
  /** the most items one statement carries */
  maxBatch: number;
  /** statements of this batcher in flight at once (per process) */
  maxInFlight: number;
}

/**
 * Coalesces concurrent calls of one hot write into one statement (group commit in the
 * application). A call runs at once when fewer than `maxInFlight` statements are in flight;
 * calls that arrive meanwhile queue, and the next free slot takes up to `maxBatch` of them
 * together: one round trip, one plan, one commit for all. There is no timer, so a lone call
 * waits for nothing; batches form only under load, where they save most.
 *
 * `runBatch(items)` answers one result per item, in order. A lone item goes through `runOne`
 * (the single-row statement). If a batch statement fails, each of its items is retried alone
 * through `runOne`, so one bad item (a foreign key gone, a conflict) never fails its neighbours
 * and every caller sees exactly the error its own request would have had.
 */
export class Batcher<I, O> {
  private readonly queue: Pending<I, O>[] = [];
  private inFlight = 0;
  private readonly log = new Logger('Batcher');

  constructor(
    private readonly runBatch: (items: I[]) => Promise<O[]>,
    private readonly runOne: (item: I) => Promise<O>,
    private readonly opts: BatcherOptions,
  ) {
    live.add(this);
  }

  get name(): string {
    return this.opts.name;
  }

  /** Calls waiting for a statement slot now. */
  get queued(): number {
    return this.queue.length;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.opts.maxInFlight && this.queue.length) {
      const batch = this.queue.splice(0, this.opts.maxBatch);
      this.inFlight++;
      void this.flush(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async flush(batch: Pending<I, O>[]): Promise<void> {
    const name = this.opts.name;
    items.labels(name).inc(batch.length);
    if (batch.length > 1) {
      statements.labels(name, 'batch').inc();
      let results: O[] | undefined;
      try {
        results = await this.runBatch(batch.map((p) => p.item));
      } catch (e) {
        // the message only: a driver's detail may quote values
        this.log.warn(`${name}: a batch of ${batch.length} failed (${(e as Error).message}); each call is retried alone`);
        results = undefined;
      }
      if (results) {
        batch.forEach((p, i) => p.resolve(results[i]));
        return;
      }
    }
    statements.labels(name, batch.length > 1 ? 'retry' : 'single').inc(batch.length);
    await Promise.all(batch.map((p) => this.runOne(p.item).then(p.resolve, p.reject)));
  }
}
