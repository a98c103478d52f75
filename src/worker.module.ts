import { BullModule } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { APP_CONFIG, AppConfig } from './config/config';
import { GuestsWorkerModule } from './modules/guests/guests.module';
import { WebhooksWorkerModule } from './modules/webhooks/webhooks.module';
import { REDACT_PATHS } from './shared/http/logger';
import { WorkerHealthServer } from './shared/http/worker-health';
import { KernelModule } from './shared/kernel.module';
import { MaintenanceWorkerModule } from './shared/maintenance/expired-rows.sweeper';
import { MailProcessor } from './shared/mail/mail.processor';
import { MAIL_TOPIC } from './shared/mail/mail.service';
import { OutboxModule } from './shared/outbox/outbox.module';

/** JSON logs via pino, same redaction as the API, no HTTP request logging. */
function workerLoggerModule() {
  return LoggerModule.forRootAsync({
    inject: [APP_CONFIG],
    useFactory: (config: AppConfig) => ({
      pinoHttp: { level: config.LOG_LEVEL, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'authp-worker' } },
    }),
  });
}

/** The kernel's email consumer (topic `email`). */
@Module({ imports: [BullModule.registerQueue({ name: MAIL_TOPIC })], providers: [MailProcessor] })
export class MailWorkerModule {}

/**
 * Every context's worker-only module: BullMQ processors (see OutboxModule for how to add one)
 * and schedules. Never imported by ApiModule: the API writes the outbox and consumes nothing.
 */
export const WORKER_MODULES = [MailWorkerModule, MaintenanceWorkerModule, GuestsWorkerModule, WebhooksWorkerModule];

/** Root module of `node dist/worker`: the kernel, the outbox relay and the processors; no HTTP. */
@Module({
  imports: [workerLoggerModule(), KernelModule, OutboxModule, ...WORKER_MODULES],
  providers: [WorkerHealthServer],
})
export class WorkerModule {}
