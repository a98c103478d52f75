import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhook signing secret rotation: the secret a rotation replaced keeps signing beside the new one
 * (two `v1,` signatures, Standard Webhooks) until previous_secret_expires_at, so receivers can
 * switch without missing a delivery. Envelope-encrypted like secret_enc, with the same AAD.
 */
export class WebhookSecretRotation1765800000000 implements MigrationInterface {
  name = 'WebhookSecretRotation1765800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN previous_secret_enc text,
        ADD COLUMN previous_secret_expires_at timestamptz,
        ADD CONSTRAINT webhook_endpoints_previous_secret_ck CHECK ((previous_secret_enc IS NULL) = (previous_secret_expires_at IS NULL))
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_previous_secret_ck, DROP COLUMN previous_secret_enc, DROP COLUMN previous_secret_expires_at`);
  }
}
