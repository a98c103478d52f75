import { BullModule } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { CreateWebhookHandler } from './create-webhook/create-webhook.handler';
import { DeleteWebhookHandler } from './delete-webhook/delete-webhook.handler';
import { DeliverWebhookHandler } from './deliver/deliver-webhook.handler';
import { WebhookDeliveryWorker } from './deliver/webhook-delivery.worker';
import { WebhookTenantSlots } from './deliver/tenant-slots';
import { RequeuePendingDeliveries } from './deliver/requeue-pending';
import { OutboxModule } from '../../shared/outbox/outbox.module';
import { EnableWebhookHandler } from './enable-webhook/enable-webhook.handler';
import { RotateWebhookSecretHandler } from './rotate-secret/rotate-webhook-secret.handler';
import { FanOutWebhookEventHandler } from './fan-out/fan-out-event.handler';
import { WebhookEventProcessor } from './fan-out/webhook-event.processor';
import { GetWebhookHandler } from './get-webhook/get-webhook.handler';
import { ListDeliveriesHandler } from './list-deliveries/list-deliveries.handler';
import { ListWebhooksHandler } from './list-webhooks/list-webhooks.handler';
import { WebhooksController } from './webhooks.controller';
import { WEBHOOK_DELIVERY_QUEUE, WEBHOOK_TOPIC } from './webhook-events';

/**
 * Tenant webhooks (contract "Agents and OAuth", spec 6), API side: endpoints (create with a
 * secret shown once, list, get, delete, enable, rotate the secret) and their delivery logs.
 */
@Module({
  controllers: [WebhooksController],
  providers: [CreateWebhookHandler, ListWebhooksHandler, GetWebhookHandler, DeleteWebhookHandler, EnableWebhookHandler, RotateWebhookSecretHandler, ListDeliveriesHandler],
})
export class WebhooksModule {}

/**
 * The worker's part: events of the outbox topic `webhook` fan out to the matching endpoints
 * (WebhookEventProcessor), and each (event, endpoint) is delivered, signed and retried on the
 * `webhook-delivery` queue (WebhookDeliveryWorker); pending deliveries whose jobs Redis lost are
 * queued again by the queue reconciler (RequeuePendingDeliveries). No HTTP.
 */
@Module({
  imports: [OutboxModule, BullModule.registerQueue({ name: WEBHOOK_TOPIC }, { name: WEBHOOK_DELIVERY_QUEUE })],
  providers: [WebhookEventProcessor, FanOutWebhookEventHandler, DeliverWebhookHandler, WebhookDeliveryWorker, WebhookTenantSlots, RequeuePendingDeliveries],
})
export class WebhooksWorkerModule {}
