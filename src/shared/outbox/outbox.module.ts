import { BullModule, WorkerHost } from '@nestjs/bullmq';
import { BeforeApplicationShutdown, Injectable, Logger, Module, OnApplicationBootstrap, OnModuleInit } from '@nestjs/common';
import { Queue, Worker } from 'bullmq';
import { outageLog } from '../redis/outage-log';
import { DiscoveryModule, DiscoveryService } from '@nestjs/core';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { bullConnection, bullPrefix } from './bull-options';
import { OutboxRelay } from './outbox-relay.service';
import { FairShare } from './fair-share';
import { QueueReconciler } from './queue-reconciler';
import { closeWorker } from './close-worker';

/**
 * Closes every BullMQ worker (waiting for the jobs it is running) before the database pool and
 * Redis clients close in onApplicationShutdown: a SIGTERM never cuts a job off mid-way.
 */
@Injectable()
export class QueueWorkersCloser implements BeforeApplicationShutdown {
  private readonly log = new Logger('QueueWorkers');
  constructor(private readonly discovery: DiscoveryService) {}

  async beforeApplicationShutdown(): Promise<void> {
    const hosts = this.discovery
      .getProviders()
      .map((w) => w.instance as unknown)
      .filter((i): i is WorkerHost => i instanceof WorkerHost);
    await Promise.all(
      hosts.map(async (h) => {
        try {
          await closeWorker(h.worker);
        } catch (err) {
          this.log.warn(`closing worker ${h.constructor.name}: ${err instanceof Error ? err.message : err}`);
        }
      }),
    );
  }
}

/**
 * The class @nestjs/bullmq builds each BullModule.registerQueue queue with: it reports a Redis
 * outage through outageLog from its construction on. A listener added later (even in
 * onModuleInit) misses the first connection failures, which BullMQ prints as raw multi-line stack
 * traces when a queue has no 'error' listener (a worker started while Redis is down).
 */
export class OutageLoggedQueue extends Queue {
  constructor(...args: ConstructorParameters<typeof Queue>) {
    super(...args);
    this.on('error', outageLog(new Logger('Queues'), `queue ${this.name}`));
  }
}
// set on import, before any module's decorator calls BullModule.registerQueue (they import OutboxModule)
BullModule.queueClass = OutageLoggedQueue;

/**
 * Every BullMQ queue a module registered (BullModule.registerQueue) reports a Redis outage
 * through outageLog; without an 'error' listener BullMQ prints each reconnection failure raw.
 * Registered queues are OutageLoggedQueue (listener from construction on); any other queue
 * provider gets one in onModuleInit, before the bootstrap hooks that wait on Redis. The
 * @Processor workers (created by @nestjs/bullmq in its onModuleInit) get one at bootstrap when
 * they have none of their own.
 */
@Injectable()
export class QueueErrorLogs implements OnModuleInit, OnApplicationBootstrap {
  private readonly log = new Logger('Queues');
  constructor(private readonly discovery: DiscoveryService) {}

  onModuleInit(): void {
    for (const w of this.discovery.getProviders()) {
      const q = w.instance as unknown;
      if (q instanceof Queue && q.listenerCount('error') === 0) q.on('error', outageLog(this.log, `queue ${q.name}`));
    }
  }

  onApplicationBootstrap(): void {
    this.onModuleInit(); // a queue provider created late (none today): no listener twice, see listenerCount
    for (const w of this.discovery.getProviders()) {
      const h = w.instance as unknown;
      const worker = h instanceof WorkerHost ? (h as unknown as { _worker?: Worker })._worker : undefined;
      if (worker && worker.listenerCount('error') === 0) worker.on('error', outageLog(this.log, `worker ${worker.name}`));
    }
  }
}

/**
 * Worker side of the transactional outbox: the relay (outbox rows -> BullMQ queue per topic),
 * the queue reconciler (re-adds the jobs a Redis data loss dropped) and the shared BullMQ configuration (connection and key prefix) for every processor.
 *
 * To consume a topic, a context adds to its worker-only module (imported by WorkerModule,
 * never by ApiModule, so the API consumes nothing):
 *
 *   imports: [BullModule.registerQueue({ name: 'webhook' })], providers: [WebhookDeliveryProcessor]
 *
 *   @Processor('webhook', { concurrency: 10 })
 *   export class WebhookDeliveryProcessor extends WorkerHost {
 *     async process(job: Job<OutboxJobData>) { ... throw to retry; UnrecoverableError to give up }
 *   }
 *
 * `openOutboxSecret(cipher, job.data)` decrypts the row's secret fields inside the processor.
 */
@Module({
  imports: [
    DiscoveryModule,
    BullModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => ({ connection: bullConnection(config), prefix: bullPrefix(config) }),
    }),
  ],
  providers: [OutboxRelay, QueueWorkersCloser, QueueReconciler, QueueErrorLogs, FairShare],
  exports: [OutboxRelay, QueueReconciler, FairShare],
})
export class OutboxModule {}
