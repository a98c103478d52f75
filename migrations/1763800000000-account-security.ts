import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Account security (issue 5): one-time link tokens (email verification, password reset, magic
 * link, step-up magic link) and one-time email codes (email OTP sign-in and step-up).
 *
 * Link tokens are 256-bit random values of which only the SHA-256 is stored; a token is bound
 * to its tenant, user, kind and to the address it was mailed to. Codes are 6 digits stored as
 * an HMAC (server key derived from KEY_ENCRYPTION_KEY, per-code salt) with an attempt counter
 * that a single conditional UPDATE increments (at most 5 evaluations per code).
 */
export class AccountSecurity1763800000000 implements MigrationInterface {
  name = 'AccountSecurity1763800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE account_tokens (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        kind text NOT NULL CHECK (kind IN ('email_verification', 'password_reset', 'magic_link', 'step_up_magic_link')),
        token_hash text NOT NULL,
        -- the address the token was mailed to: a token for an address the user no longer has is void
        email_normalized text NOT NULL,
        -- step-up: the session that asked (the link steps up that session only)
        session_id uuid,
        -- SHA-256 of the resume_binding given at request time (magic link)
        binding_hash text,
        oauth_params jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        used_at timestamptz,
        CONSTRAINT account_tokens_hash_uq UNIQUE (token_hash),
        CONSTRAINT account_tokens_step_up_has_session CHECK ((kind = 'step_up_magic_link') = (session_id IS NOT NULL))
      );
      CREATE INDEX account_tokens_user_kind_idx ON account_tokens (user_id, kind);
      CREATE INDEX account_tokens_expires_idx ON account_tokens (expires_at);

      CREATE TABLE email_otp_codes (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        purpose text NOT NULL CHECK (purpose IN ('login', 'step_up')),
        email_normalized text NOT NULL,
        -- null: a login_or_create code for an address without an account yet
        user_id uuid REFERENCES users (id) ON DELETE CASCADE,
        session_id uuid,
        mode text NOT NULL DEFAULT 'login' CHECK (mode IN ('login', 'login_or_create')),
        code_hash text NOT NULL,
        salt text NOT NULL,
        attempts integer NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 5),
        binding_hash text,
        oauth_params jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        consumed_at timestamptz,
        CONSTRAINT email_otp_step_up_has_session CHECK ((purpose = 'step_up') = (session_id IS NOT NULL AND user_id IS NOT NULL))
      );
      -- one live code per address (sign-in) and per session (step-up): a new request replaces the old
      CREATE UNIQUE INDEX email_otp_login_uq ON email_otp_codes (tenant_id, email_normalized) WHERE purpose = 'login';
      CREATE UNIQUE INDEX email_otp_step_up_uq ON email_otp_codes (session_id) WHERE purpose = 'step_up';
      CREATE INDEX email_otp_expires_idx ON email_otp_codes (expires_at);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE email_otp_codes, account_tokens`);
  }
}
