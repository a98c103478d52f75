import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * TOTP MFA (issue 5 items 5-6, spec 2.2 Mfa* schemas): one TOTP factor per user (seed
 * envelope-encrypted, pending until verify-setup), hashed single-use recovery codes, and the
 * short-lived login challenges answered by POST /v1/auth/mfa/verify.
 */
export class Mfa1763810000000 implements MigrationInterface {
  name = 'Mfa1763810000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE user_mfa_factors (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        kind text NOT NULL DEFAULT 'totp' CHECK (kind IN ('totp')),
        -- EnvelopeCipher envelope of the base32 seed, AAD bound to the user
        secret_enc text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        -- null while pending (setup done, verify-setup not yet)
        enabled_at timestamptz,
        -- replay protection: the highest TOTP time step accepted so far (conditional update)
        last_used_step bigint NOT NULL DEFAULT 0,
        last_used_at timestamptz,
        CONSTRAINT user_mfa_factors_user_kind_uq UNIQUE (user_id, kind)
      );

      CREATE TABLE mfa_recovery_codes (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        -- HMAC-SHA256 (key derived from KEY_ENCRYPTION_KEY) of user id and normalized code
        code_hash text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        used_at timestamptz,
        CONSTRAINT mfa_recovery_codes_user_hash_uq UNIQUE (user_id, code_hash)
      );

      CREATE TABLE mfa_challenges (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        -- SHA-256 of the mfa_challenge_token
        token_hash text NOT NULL,
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        kind text NOT NULL DEFAULT 'login' CHECK (kind IN ('login', 'enrollment')),
        -- amr of the first factor (password, or a passwordless method), kept for the session's amr
        first_factor_amr text[] NOT NULL DEFAULT '{pwd}',
        -- counted before each evaluation (conditional update), at most 5
        attempts integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        used_at timestamptz,
        CONSTRAINT mfa_challenges_token_uq UNIQUE (token_hash)
      );
      CREATE INDEX mfa_challenges_user_idx ON mfa_challenges (user_id, expires_at);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE mfa_challenges, mfa_recovery_codes, user_mfa_factors`);
  }
}
