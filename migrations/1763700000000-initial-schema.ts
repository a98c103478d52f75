import { MigrationInterface, QueryRunner } from 'typeorm';

/** Platform foundation: tenants, dashboard, API keys, end users, sessions, keys, audit, outbox. */
export class InitialSchema1763700000000 implements MigrationInterface {
  name = 'InitialSchema1763700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tenants (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        slug text NOT NULL,
        name text NOT NULL,
        tier text NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pro', 'enterprise')),
        user_scopes text NOT NULL DEFAULT 'openid profile email',
        default_user_role text NOT NULL DEFAULT 'member' CHECK (default_user_role IN ('read_only', 'member', 'admin')),
        anonymous_signins_enabled boolean NOT NULL DEFAULT false,
        anonymous_ever_enabled boolean NOT NULL DEFAULT false,
        anonymous_user_ttl_days integer NOT NULL DEFAULT 30 CHECK (anonymous_user_ttl_days BETWEEN 1 AND 180),
        minor_protection_enabled boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT tenants_slug_uq UNIQUE (slug)
      );

      CREATE TABLE dashboard_users (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        email text NOT NULL,
        email_normalized text NOT NULL,
        password_hash text NOT NULL,
        consent_marketing boolean NOT NULL DEFAULT false,
        terms_accepted_at timestamptz,
        privacy_accepted_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        last_login_at timestamptz,
        CONSTRAINT dashboard_users_email_uq UNIQUE (email_normalized)
      );

      CREATE TABLE tenant_members (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id uuid NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
        role text NOT NULL CHECK (role IN ('owner', 'member')),
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, user_id)
      );
      CREATE INDEX tenant_members_user_idx ON tenant_members (user_id);

      CREATE TABLE dashboard_sessions (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        token_hash text NOT NULL,
        user_id uuid NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
        csrf_token text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        last_seen_at timestamptz NOT NULL DEFAULT now(),
        absolute_expires_at timestamptz NOT NULL,
        reauth_at timestamptz,
        revoked_at timestamptz,
        CONSTRAINT dashboard_sessions_token_uq UNIQUE (token_hash)
      );
      CREATE INDEX dashboard_sessions_user_idx ON dashboard_sessions (user_id);

      CREATE TABLE dashboard_invites (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        email text NOT NULL,
        email_normalized text NOT NULL,
        role text NOT NULL CHECK (role IN ('owner', 'member')),
        token_hash text NOT NULL,
        invited_by uuid REFERENCES dashboard_users (id) ON DELETE SET NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        accepted_at timestamptz,
        CONSTRAINT dashboard_invites_token_uq UNIQUE (token_hash)
      );

      CREATE TABLE idempotency_keys (
        scope text NOT NULL,
        key text NOT NULL,
        request_hash text NOT NULL,
        status_code integer,
        response jsonb,
        secret_enc text,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (scope, key)
      );

      CREATE TABLE api_keys (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        name text NOT NULL,
        prefix text NOT NULL,
        key_hash text NOT NULL,
        created_by uuid REFERENCES dashboard_users (id) ON DELETE SET NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz,
        CONSTRAINT api_keys_hash_uq UNIQUE (key_hash)
      );
      CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, created_at DESC, id DESC);

      CREATE TABLE users (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        email text,
        email_normalized text,
        email_verified boolean NOT NULL DEFAULT false,
        password_hash text,
        is_anonymous boolean NOT NULL DEFAULT false,
        role text NOT NULL DEFAULT 'member' CHECK (role IN ('read_only', 'member', 'admin')),
        public_metadata jsonb NOT NULL DEFAULT '{}',
        date_of_birth_enc text,
        consent_at timestamptz,
        created_by_api_key_id uuid REFERENCES api_keys (id) ON DELETE SET NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        last_sign_in_at timestamptz,
        last_active_at timestamptz NOT NULL DEFAULT now(),
        claimed_at timestamptz,
        CONSTRAINT users_anonymous_has_no_email CHECK (NOT is_anonymous OR email_normalized IS NULL)
      );
      CREATE UNIQUE INDEX users_tenant_email_uq ON users (tenant_id, email_normalized) WHERE email_normalized IS NOT NULL;
      CREATE INDEX users_tenant_created_idx ON users (tenant_id, created_at);

      CREATE TABLE user_sessions (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        aal text NOT NULL DEFAULT 'AAL1',
        amr text[] NOT NULL DEFAULT '{}',
        api_key_id uuid REFERENCES api_keys (id) ON DELETE SET NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        refreshed_at timestamptz,
        revoked_at timestamptz,
        revoked_reason text
      );
      CREATE INDEX user_sessions_user_idx ON user_sessions (user_id);

      CREATE TABLE refresh_tokens (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        session_id uuid NOT NULL REFERENCES user_sessions (id) ON DELETE CASCADE,
        tenant_id uuid NOT NULL,
        user_id uuid NOT NULL,
        secret_hash text NOT NULL,
        parent_id uuid,
        created_at timestamptz NOT NULL DEFAULT now(),
        rotated_at timestamptz,
        revoked_at timestamptz,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX refresh_tokens_session_idx ON refresh_tokens (session_id);
      CREATE INDEX refresh_tokens_parent_idx ON refresh_tokens (parent_id) WHERE parent_id IS NOT NULL;

      CREATE TABLE signing_keys (
        kid text PRIMARY KEY,
        alg text NOT NULL DEFAULT 'RS256',
        public_pem text NOT NULL,
        private_enc text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        retired_at timestamptz
      );

      CREATE TABLE audit_events (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid,
        type text NOT NULL,
        severity text NOT NULL DEFAULT 'info',
        actor_type text NOT NULL,
        actor_id text,
        target_type text,
        target_id text,
        metadata jsonb NOT NULL DEFAULT '{}',
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX audit_events_tenant_idx ON audit_events (tenant_id, created_at DESC, id DESC);
      CREATE INDEX audit_events_type_idx ON audit_events (tenant_id, type, created_at DESC);

      CREATE TABLE outbox (
        id bigserial PRIMARY KEY,
        tenant_id uuid,
        topic text NOT NULL,
        event_type text NOT NULL,
        payload jsonb NOT NULL,
        secret_enc text,
        created_at timestamptz NOT NULL DEFAULT now(),
        dispatched_at timestamptz
      );
      CREATE INDEX outbox_pending_idx ON outbox (id) WHERE dispatched_at IS NULL;
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE outbox, audit_events, signing_keys, refresh_tokens, user_sessions, users, api_keys,
      idempotency_keys, dashboard_invites, dashboard_sessions, tenant_members, dashboard_users, tenants CASCADE`);
  }
}
