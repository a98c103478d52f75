import { ApiProperty } from '@nestjs/swagger';

/** A row of webhook_endpoints as the handlers read it (never with the secret). */
export interface WebhookEndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  events: string[];
  agent_client_id: string | null;
  created_at: Date;
  disabled_at: Date | null;
  disabled_reason: string | null;
}

/** Columns of WebhookEndpointRow, for SELECT and RETURNING lists. */
export const ENDPOINT_COLUMNS = 'id, tenant_id, url, events, agent_client_id, created_at, disabled_at, disabled_reason';

/** A webhook endpoint as listed: the signing secret is never part of it. */
export class WebhookEndpointResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ example: 'https://example.com/hooks/authp' }) url!: string;
  @ApiProperty({ type: [String], example: ['agent.revoked', 'oauth.token_exchange.issued'] }) events!: string[];
  @ApiProperty({ format: 'uuid', nullable: true, type: String }) agent_client_id!: string | null;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ format: 'date-time', nullable: true, type: String, description: 'set when the endpoint was disabled after repeated failed deliveries' })
  disabled_at!: string | null;
  @ApiProperty({ enum: ['repeated_failures', null], nullable: true, type: String }) disabled_reason!: string | null;
}

/** The creation answer: the endpoint plus its signing secret, shown this once. */
export class CreatedWebhookEndpointResponse extends WebhookEndpointResponse {
  @ApiProperty({ example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', description: '`whsec_` + base64 of 32 random bytes; shown once, never listed' })
  secret!: string;
}

/** The rotation answer: the endpoint, its new signing secret (shown this once) and until when the replaced one still signs. */
export class RotatedWebhookSecretResponse extends CreatedWebhookEndpointResponse {
  @ApiProperty({ format: 'date-time', nullable: true, type: String, description: 'until then deliveries carry a second `v1,` signature made with the replaced secret; null: it stopped at once' })
  previous_secret_expires_at!: string | null;
}

export function toEndpointResponse(r: WebhookEndpointRow): WebhookEndpointResponse {
  return {
    id: r.id,
    url: r.url,
    events: r.events,
    agent_client_id: r.agent_client_id,
    created_at: r.created_at.toISOString(),
    disabled_at: r.disabled_at ? r.disabled_at.toISOString() : null,
    disabled_reason: r.disabled_reason,
  };
}

/** One row of an endpoint's delivery log. */
export class WebhookDeliveryResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ description: 'the `webhook-id` header, the same on every attempt', example: 'msg_2f1c0c1b6c0a4c1e9b7f0a4c8d1e2f3a' }) webhook_id!: string;
  @ApiProperty({ example: 'agent.revoked' }) event_type!: string;
  @ApiProperty({ enum: ['pending', 'delivered', 'failed'] }) status!: 'pending' | 'delivered' | 'failed';
  @ApiProperty({ description: 'attempts made so far' }) attempts!: number;
  @ApiProperty({ nullable: true, type: Number, description: 'HTTP status of the last attempt (null: no response)' }) last_status_code!: number | null;
  @ApiProperty({ nullable: true, type: String, example: 'HTTP 503' }) last_error!: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) last_attempt_at!: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String, description: 'when the next retry is due (null unless pending)' }) next_attempt_at!: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) delivered_at!: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) failed_at!: string | null;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
}
