import { MigrationInterface, QueryRunner } from 'typeorm';

/** Agent clients (spec 2.10, 3.2), their denylist, per-user revocations (3.3) and actions (4.4). */
export class Agents1763900000000 implements MigrationInterface {
  name = 'Agents1763900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE agent_clients (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),          -- also the OAuth client_id
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        name text NOT NULL,
        description text,
        agent_class text,
        logo_url text,
        scopes text[] NOT NULL DEFAULT '{}',
        grant_types text[] NOT NULL DEFAULT '{}',
        agent_token_max_ttl_sec integer NOT NULL DEFAULT 900 CHECK (agent_token_max_ttl_sec BETWEEN 60 AND 900),
        rate_limits jsonb NOT NULL DEFAULT '{}',
        max_concurrent_tokens integer,
        secret_hash text NOT NULL,
        agent_metadata_version integer NOT NULL DEFAULT 1,
        created_by uuid REFERENCES dashboard_users (id) ON DELETE SET NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        disabled_at timestamptz,
        revoked_at timestamptz
      );
      CREATE INDEX agent_clients_tenant_idx ON agent_clients (tenant_id, created_at DESC, id DESC);

      -- source of truth of the denylist (Redis is a cache): a revoked or killed agent's tokens are
      -- refused until expires_at (its agent_token_max_ttl_sec after the event)
      CREATE TABLE agent_denylist (
        id bigserial PRIMARY KEY,
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        agent_client_id uuid NOT NULL REFERENCES agent_clients (id) ON DELETE CASCADE,
        reason text NOT NULL CHECK (reason IN ('agent_revoked', 'tokens_killed')),
        not_before timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX agent_denylist_live_idx ON agent_denylist (agent_client_id, expires_at);

      CREATE TABLE agent_user_revocations (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        agent_client_id uuid NOT NULL REFERENCES agent_clients (id) ON DELETE CASCADE,
        reason text NOT NULL DEFAULT 'gdpr_art_7_withdrawal',
        revoked_at timestamptz,
        restored_at timestamptz,
        PRIMARY KEY (tenant_id, user_id, agent_client_id)
      );

      CREATE TABLE agent_actions (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        agent_client_id uuid NOT NULL REFERENCES agent_clients (id) ON DELETE CASCADE,
        action text NOT NULL,
        actor_user_id uuid,
        resource text,
        method_or_event text,
        jti text,
        scope_used text,
        ip_hash_prefix text,
        user_agent_hash_prefix text,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX agent_actions_agent_idx ON agent_actions (agent_client_id, created_at DESC, id DESC);
      CREATE INDEX agent_actions_user_idx ON agent_actions (tenant_id, actor_user_id, agent_client_id, created_at DESC);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE agent_actions, agent_user_revocations, agent_denylist, agent_clients`);
  }
}
