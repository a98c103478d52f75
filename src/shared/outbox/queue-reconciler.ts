import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { OutboxRelay } from './outbox-relay.service';

/** One thing the reconciler puts back; `run` returns a count for logs and tests (each step says of what). */
export interface ReconcileStep {
  name: string;
  run: (graceSeconds: number) => Promise<number>;
}

/**
 * Redis holds every BullMQ job between the outbox relay and its consumer, the webhook retries and
 * the job schedules; a Redis that restarts without persistence, fails over to a replica that
 * lagged, or is flushed, loses them. PostgreSQL still knows what was owed: outbox rows relayed but
 * never settled (`processed_at`), webhook deliveries still pending, the schedules the code
 * declares. Every QUEUE_RECONCILE_SECONDS, and once when the worker starts, each step re-adds
 * those under their fixed job ids: BullMQ ignores an id it still holds, so in the normal case
 * nothing changes, and after a loss the work resumes (at least once: a job whose side effect
 * happened but whose settlement was lost with Redis may run twice).
 *
 * Steps are registered by the contexts that own the jobs (the relay here, webhook deliveries,
 * maintenance schedules). Several workers may reconcile at once: every re-add is idempotent.
 */
@Injectable()
export class QueueReconciler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger(QueueReconciler.name);
  private readonly steps: ReconcileStep[] = [];
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private running?: Promise<Record<string, number>>;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    relay: OutboxRelay,
  ) {
    this.register({ name: 'outbox', run: (grace) => relay.redispatchUnsettled(grace) });
  }

  register(step: ReconcileStep): void {
    this.steps.push(step);
  }

  onApplicationBootstrap(): void {
    // the first pass once every module has registered its steps (a worker restarted after a
    // Redis incident puts the work back at once), then one per interval
    setImmediate(() => void (this.stopped || this.runOnce()));
    this.timer = setInterval(() => void this.runOnce(), this.config.QUEUE_RECONCILE_SECONDS * 1000);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One pass of every step (a pass already running is joined, not doubled); per step, how many it re-added. */
  runOnce(graceSeconds = this.config.QUEUE_RECONCILE_GRACE_SECONDS): Promise<Record<string, number>> {
    this.running ??= this.pass(graceSeconds).finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(graceSeconds: number): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const step of this.steps) {
      try {
        counts[step.name] = await step.run(graceSeconds);
      } catch (err) {
        // Redis or PostgreSQL away: the next pass tries again
        this.log.warn(`queue reconcile step ${step.name} failed: ${err instanceof Error ? err.message : err}`);
      }
    }
    return counts;
  }
}
