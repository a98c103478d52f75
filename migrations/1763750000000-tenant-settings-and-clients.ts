import { MigrationInterface, QueryRunner } from 'typeorm';

/** Tenant security settings (spec 2.8), email domain lists, passkey RP id, and OAuth clients. */
export class TenantSettingsAndClients1763750000000 implements MigrationInterface {
  name = 'TenantSettingsAndClients1763750000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE tenants
        ADD COLUMN mfa_policy text NOT NULL DEFAULT 'optional' CHECK (mfa_policy IN ('optional', 'required')),
        ADD COLUMN mfa_grace_period_days integer NOT NULL DEFAULT 7 CHECK (mfa_grace_period_days BETWEEN 3 AND 30),
        ADD COLUMN mfa_required_since timestamptz,
        ADD COLUMN block_disposable_emails boolean NOT NULL DEFAULT false,
        ADD COLUMN block_email_subaddresses boolean NOT NULL DEFAULT false,
        ADD COLUMN automatic_account_linking_enabled boolean NOT NULL DEFAULT false,
        ADD COLUMN explicit_account_linking_enabled boolean NOT NULL DEFAULT false,
        ADD COLUMN sms_otp_enabled boolean NOT NULL DEFAULT false,
        ADD COLUMN sms_otp_monthly_cap integer NOT NULL DEFAULT 1000 CHECK (sms_otp_monthly_cap BETWEEN 0 AND 100000),
        ADD COLUMN byok_twilio_account_sid text,
        ADD COLUMN byok_twilio_auth_token_enc text,
        ADD COLUMN byok_twilio_messaging_service_sid text,
        ADD COLUMN magic_link_enabled boolean NOT NULL DEFAULT false,
        ADD COLUMN email_otp_enabled boolean NOT NULL DEFAULT false,
        ADD COLUMN email_otp_captcha_required boolean NOT NULL DEFAULT false,
        ADD COLUMN sms_allowed_countries text[],
        ADD COLUMN email_allowlist text[] NOT NULL DEFAULT '{}',
        ADD COLUMN email_blocklist text[] NOT NULL DEFAULT '{}',
        ADD COLUMN passkey_rp_id text;

      CREATE TABLE oauth_clients (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        name text NOT NULL,
        client_type text NOT NULL CHECK (client_type IN ('public', 'confidential')),
        redirect_uris text[] NOT NULL DEFAULT '{}',
        grant_types text[] NOT NULL DEFAULT '{}',
        scopes text[] NOT NULL DEFAULT '{}',
        secret_hash text,
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz
      );
      CREATE INDEX oauth_clients_tenant_idx ON oauth_clients (tenant_id, created_at DESC, id DESC);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    // dropping a column drops its CHECK constraint with it
    await q.query(`
      DROP TABLE oauth_clients;
      ALTER TABLE tenants
        DROP COLUMN mfa_policy,
        DROP COLUMN mfa_grace_period_days,
        DROP COLUMN mfa_required_since,
        DROP COLUMN block_disposable_emails,
        DROP COLUMN block_email_subaddresses,
        DROP COLUMN automatic_account_linking_enabled,
        DROP COLUMN explicit_account_linking_enabled,
        DROP COLUMN sms_otp_enabled,
        DROP COLUMN sms_otp_monthly_cap,
        DROP COLUMN byok_twilio_account_sid,
        DROP COLUMN byok_twilio_auth_token_enc,
        DROP COLUMN byok_twilio_messaging_service_sid,
        DROP COLUMN magic_link_enabled,
        DROP COLUMN email_otp_enabled,
        DROP COLUMN email_otp_captcha_required,
        DROP COLUMN sms_allowed_countries,
        DROP COLUMN email_allowlist,
        DROP COLUMN email_blocklist,
        DROP COLUMN passkey_rp_id;
    `);
  }
}
