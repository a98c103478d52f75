import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import { Strategy } from 'passport-custom';
import { ApiKeyCache } from '../cache/api-key.cache';
import { Db } from '../db/db.service';
import { AppError } from '../errors/app-error';
import { sha256Hex } from '../crypto/tokens';
import { ApiKeyPrincipal, authOf } from './auth-context';

/** Longer X-API-Key values are refused unread. */
const MAX_API_KEY_LENGTH = 200;

/** Resolves X-API-Key to its tenant; only the SHA-256 of a key is stored. */
@Injectable()
export class ApiKeyResolver {
  constructor(
    private readonly db: Db,
    private readonly cache: ApiKeyCache,
  ) {}

  /**
   * `key`'s principal. With `req`, a cache read ApiKeyPrefetchGuard started for the same key is
   * used instead of a second one; a miss loads from PostgreSQL here, after the guards before
   * this one (rate limits) let the request through.
   */
  async resolve(key: string | undefined, req?: FastifyRequest): Promise<ApiKeyPrincipal> {
    if (!key || key.length > MAX_API_KEY_LENGTH) throw new AppError('auth/invalid_api_key');
    const keyHash = sha256Hex(key);
    const early = req?.auth?.apiKeyLookup;
    const slot = early?.keyHash === keyHash ? await early.slot : await this.cache.lookup(keyHash);
    const principal = slot.value ?? (await this.cache.fillFrom(keyHash, () => this.load(keyHash), slot.guard));
    if (!principal) throw new AppError('auth/invalid_api_key');
    return principal;
  }

  /**
   * Starts the cache read of the request's X-API-Key principal (Redis only, never PostgreSQL),
   * for `resolve` to use later. Started before the rate-limit guard counts the request, it leaves
   * in the same Redis write as that count (ioredis auto-pipelining): one round trip, not two.
   */
  prefetch(req: FastifyRequest): void {
    const header = req.headers['x-api-key'];
    const key = Array.isArray(header) ? header[0] : header;
    if (!key || key.length > MAX_API_KEY_LENGTH) return;
    const keyHash = sha256Hex(key);
    authOf(req).apiKeyLookup = { keyHash, slot: this.cache.lookup(keyHash) };
  }

  /** The live key with its tenant's settings; unknown and revoked keys are not cached. */
  private async load(keyHash: string): Promise<ApiKeyPrincipal | undefined> {
    const rows = await this.db.query<{
      id: string; tenant_id: string; slug: string; name: string; tier: ApiKeyPrincipal['tier']; user_scopes: string;
      default_user_role: string; anonymous_signins_enabled: boolean; minor_protection_enabled: boolean;
    }>(
      `SELECT k.id, k.tenant_id, t.slug, t.name, t.tier, t.user_scopes, t.default_user_role, t.anonymous_signins_enabled,
              t.minor_protection_enabled
         FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
      [keyHash],
      'api_key_resolve',
    );
    if (!rows.length) return undefined;
    const r = rows[0];
    return {
      id: r.id,
      tenantId: r.tenant_id,
      tenantSlug: r.slug,
      tier: r.tier,
      tenant: {
        name: r.name,
        userScopes: r.user_scopes,
        defaultUserRole: r.default_user_role,
        anonymousSigninsEnabled: r.anonymous_signins_enabled,
        minorProtectionEnabled: r.minor_protection_enabled,
      },
    };
  }
}

@Injectable()
export class ApiKeyStrategy extends PassportStrategy(Strategy, 'api-key') {
  constructor(private readonly resolver: ApiKeyResolver) {
    super();
  }

  async validate(req: FastifyRequest): Promise<ApiKeyPrincipal> {
    // the route's 401s (this key, or a password or refresh token later) challenge with ApiKey (challengeFor)
    authOf(req).scheme = 'api-key';
    const header = req.headers['x-api-key'];
    const principal = await this.resolver.resolve(Array.isArray(header) ? header[0] : header, req);
    authOf(req).apiKey = principal;
    return principal;
  }
}
