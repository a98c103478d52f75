import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tenant webhooks (contract "Agents and OAuth", spec 6): endpoints with their event and
 * agent_client_id filters, and the delivery log (one row per (event, endpoint)).
 */
export class Webhooks1763910000000 implements MigrationInterface {
  name = 'Webhooks1763910000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE webhook_endpoints (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        url text NOT NULL,
        events text[] NOT NULL CHECK (cardinality(events) > 0),
        -- only events whose payload.agent_client_id equals this one (spec 6)
        agent_client_id uuid REFERENCES agent_clients (id) ON DELETE CASCADE,
        -- 'whsec_' + base64 of 32 random bytes, envelope-encrypted (AAD: the endpoint id): it is
        -- read back to sign every delivery
        secret_enc text NOT NULL,
        created_by uuid REFERENCES dashboard_users (id) ON DELETE SET NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        -- deliveries that exhausted every retry since the last successful one
        consecutive_failed_deliveries integer NOT NULL DEFAULT 0,
        last_success_at timestamptz,
        disabled_at timestamptz,
        disabled_reason text CHECK (disabled_reason IN ('repeated_failures'))
      );
      CREATE INDEX webhook_endpoints_tenant_idx ON webhook_endpoints (tenant_id, created_at DESC, id DESC);

      CREATE TABLE webhook_deliveries (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        outbox_id bigint NOT NULL,
        -- the Standard Webhooks webhook-id: the same on every attempt of this delivery
        message_id text NOT NULL,
        event_type text NOT NULL,
        -- the exact JSON body {type, timestamp, data}, sent unchanged on every attempt
        body text NOT NULL,
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        last_status_code integer,
        last_error text,
        last_attempt_at timestamptz,
        next_attempt_at timestamptz,
        delivered_at timestamptz,
        failed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        -- a re-relayed outbox row never fans out twice to one endpoint
        CONSTRAINT webhook_deliveries_event_endpoint_key UNIQUE (outbox_id, endpoint_id)
      );
      CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE webhook_deliveries, webhook_endpoints`);
  }
}
