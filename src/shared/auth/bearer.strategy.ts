import { Injectable, Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { PassportStrategy } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import { Strategy } from 'passport-custom';
import { AccessClaims, JwtService, TokenVerificationError } from '../crypto/jwt.service';
import { bearerRequired, InvalidTokenError, tenantMismatch } from '../errors/app-error';
import { ApiKeyResolver } from './api-key.strategy';
import { authOf, UserPrincipal } from './auth-context';
import { bearerPrefetchSource, BearerPrefetchSource } from './bearer-prefetch';
import { TokenRevocationService } from './token-revocation.service';

/**
 * Reads `Authorization: Bearer <jwt>` (RFC 6750 section 2.1: the scheme name in any case, then one
 * or more spaces). Undefined when there is no Authorization header, or when it names another
 * scheme (Basic, a proxy's credentials): as without credentials, a bearer route then answers the
 * bare challenge with no error code (RFC 6750 section 3.1). A Bearer header whose token is
 * malformed is an invalid token (401 error="invalid_token").
 */
export function bearerToken(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  if (!h) return undefined;
  const m = /^Bearer +([A-Za-z0-9._~+/-]+=*)$/i.exec(h);
  if (m) return m[1];
  if (!/^Bearer(?:\s|$)/i.test(h)) return undefined;
  throw new InvalidTokenError();
}

/**
 * A per-call limit other modules add to the bearer guard (the agents module: an agent's
 * `api_calls_per_min`). `prepare` answers undefined, without any I/O, when no limit applies to
 * the token; otherwise a promise (read in parallel with the revocation check) of the function
 * that counts the call, or null when no limit applies after all. The guard calls that function
 * only once the token is otherwise accepted (signature, audience, tenant, revocation, denylist),
 * so a revoked or killed token never uses up the agent's calls; it throws the refusal (429) when
 * the call is over the limit.
 */
export interface BearerCallLimiter {
  prepare(claims: AccessClaims): Promise<(() => Promise<void>) | null> | undefined;
}

/**
 * Verifies an end-user access token: signature, kid, iss, aud, exp, then the tenant (an
 * X-API-Key sent beside it must be of the same tenant) and revocation (ended session, denylist).
 */
@Injectable()
export class BearerAuthenticator {
  constructor(
    private readonly jwt: JwtService,
    private readonly apiKeys: ApiKeyResolver,
    private readonly revocation: TokenRevocationService,
    private readonly moduleRef: ModuleRef,
  ) {}

  private readonly prefetchSources = new Map<Type<BearerPrefetchSource>, BearerPrefetchSource>();
  private callLimiter: BearerCallLimiter | undefined;

  /** Installs the per-call limiter (one: the agents module's). */
  registerCallLimiter(limiter: BearerCallLimiter): void {
    this.callLimiter = limiter;
  }

  /** The keys the route asked for (BearerPrefetch), read with the revocation check. */
  private prefetchKeys(req: FastifyRequest, claims: AccessClaims): string[] {
    const type = bearerPrefetchSource(req);
    if (!type) return [];
    let source = this.prefetchSources.get(type);
    if (!source) {
      source = this.moduleRef.get<BearerPrefetchSource>(type, { strict: false });
      this.prefetchSources.set(type, source);
    }
    return source.prefetchKeys(claims);
  }

  async authenticate(req: FastifyRequest, token: string): Promise<UserPrincipal> {
    // a 401 from here on (an unknown X-API-Key beside the token, a handler's wrong password)
    // challenges with Bearer (challengeFor)
    authOf(req).scheme = 'bearer';
    let claims;
    try {
      claims = await this.jwt.verify(token, { audience: false });
    } catch (e) {
      if (e instanceof TokenVerificationError) throw new InvalidTokenError();
      throw e;
    }
    if (!claims.tenant_id || !claims.sub) throw new InvalidTokenError();
    // this API accepts only tokens meant for it: a user token always is; an agent token is when
    // the agent asked for no other audience (one minted for another service is that service's)
    if (!this.audienceOk(claims.aud)) throw new InvalidTokenError();
    const apiKeyHeader = req.headers['x-api-key'];
    const extraKeys = this.prefetchKeys(req, claims);
    const [{ reason, extra }, apiKey, countCall] = await Promise.all([
      this.revocation.check(claims, extraKeys),
      apiKeyHeader ? this.apiKeys.resolve(String(apiKeyHeader), req) : undefined,
      claims.act ? this.callLimiter?.prepare(claims) : undefined,
    ]);
    if (reason) throw new InvalidTokenError(reason === 'session_revoked' ? 'invalid_token' : reason);
    if (apiKey && apiKey.tenantId !== claims.tenant_id) throw tenantMismatch();
    // only an accepted token's call counts (one more round trip, for agents with a call limit only)
    if (countCall) await countCall();
    const principal: UserPrincipal = {
      userId: claims.sub,
      tenantId: claims.tenant_id,
      sessionId: claims.sid,
      isAnonymous: claims.is_anonymous === true,
      claims,
    };
    const auth = authOf(req);
    auth.user = principal;
    if (apiKey) auth.apiKey = apiKey;
    if (extraKeys.length) auth.prefetched = new Map(extraKeys.map((k, i) => [k, extra[i]]));
    return principal;
  }

  private audienceOk(aud: string | string[]): boolean {
    const want = this.jwt.audience;
    return Array.isArray(aud) ? aud.includes(want) : aud === want;
  }
}

@Injectable()
export class BearerStrategy extends PassportStrategy(Strategy, 'bearer') {
  constructor(private readonly bearer: BearerAuthenticator) {
    super();
  }
  async validate(req: FastifyRequest): Promise<UserPrincipal> {
    const token = bearerToken(req);
    if (!token) throw bearerRequired();
    return this.bearer.authenticate(req, token);
  }
}

/** Like bearer, but a request without Authorization passes as anonymous-to-us (register's claim). */
@Injectable()
export class OptionalBearerStrategy extends PassportStrategy(Strategy, 'optional-bearer') {
  constructor(private readonly bearer: BearerAuthenticator) {
    super();
  }
  async validate(req: FastifyRequest): Promise<UserPrincipal | { none: true }> {
    const token = bearerToken(req);
    if (!token) return { none: true };
    return this.bearer.authenticate(req, token);
  }
}
