import { randomBytes } from 'crypto';
import { sha256Hex } from '../../src/shared/crypto/tokens';
import { Db } from '../../src/shared/db/db.service';

export interface TenantFixture {
  id: string;
  slug: string;
  apiKey: string;
  apiKeyId: string;
}

/**
 * A tenant with one API key, persisted straight through the tables (for tests of modules that
 * only need a tenant to exist; onboarding itself is tested through HTTP in tenants/).
 */
export async function createTenant(
  db: Db,
  overrides: Partial<{ tier: string; anonymous_signins_enabled: boolean; default_user_role: string; minor_protection_enabled: boolean; anonymous_user_ttl_days: number }> = {},
): Promise<TenantFixture> {
  const slug = `t-${randomBytes(5).toString('hex')}`;
  const [t] = await db.query<{ id: string }>(
    `INSERT INTO tenants (slug, name, tier, anonymous_signins_enabled, anonymous_ever_enabled, default_user_role, minor_protection_enabled, anonymous_user_ttl_days)
     VALUES ($1, $2, $3, $4, $4, $5, $6, $7) RETURNING id`,
    [
      slug,
      `Tenant ${slug}`,
      overrides.tier ?? 'free',
      overrides.anonymous_signins_enabled ?? false,
      overrides.default_user_role ?? 'member',
      overrides.minor_protection_enabled ?? false,
      overrides.anonymous_user_ttl_days ?? 30,
    ],
  );
  const key = `authp_${randomBytes(32).toString('base64url')}`;
  const [k] = await db.query<{ id: string }>(
    `INSERT INTO api_keys (tenant_id, name, prefix, key_hash) VALUES ($1, 'test', $2, $3) RETURNING id`,
    [t.id, key.slice(0, 12), sha256Hex(key)],
  );
  return { id: t.id, slug, apiKey: key, apiKeyId: k.id };
}
