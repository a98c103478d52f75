import { randomUUID, sign as rsaSign } from 'crypto';
import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import * as jwt from 'jsonwebtoken';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { jittered } from '../cache/jitter';
import { UUID } from '../uuid';
import { SigningKeysService } from './signing-keys.service';

export type Aal = 'AAL1' | 'AAL2';

/** Claims of a user access token (contract "Tokens"); agent tokens add `act` and drop `sid`. */
export interface AccessClaims {
  iss: string;
  sub: string;
  aud: string | string[];
  exp: number;
  iat: number;
  jti: string;
  tenant_id: string;
  sid?: string;
  scope: string;
  amr: string[];
  aal: Aal;
  /** when the user authenticated (NumericDate seconds, OIDC Core 2): the session's, kept across refreshes */
  auth_time?: number;
  role: string;
  is_anonymous: boolean;
  email?: string | null;
  email_verified?: boolean;
  act?: { sub: string };
  /**
   * An agent token's subject session (the `sid` of the token it was exchanged for): the agent
   * token ends with that session (sign-out, sign-out everywhere, a password reset or change, reuse
   * detection), as the session's own tokens do. Not `sid`: an agent token is no session's token
   * (contract "Tokens"), and the session routes refuse it. Absent from agent tokens signed before
   * 2026-11-30.
   */
  subject_sid?: string;
  /**
   * The client the token was issued to (RFC 9068 section 2.2, REQUIRED with `typ: at+jwt`): an
   * agent token's is its agent (act.sub, RFC 8693 section 4.3); a user's, guest's or enrollment
   * token's is its tenant (the tenant's application, whichever of its API keys it came through).
   * Absent from tokens signed before it was a claim.
   */
  client_id?: string;
  [extra: string]: unknown;
}

export type ClaimsInput = Omit<AccessClaims, 'iss' | 'aud' | 'exp' | 'iat' | 'jti'> & { aud?: string | string[] };

export class TokenVerificationError extends Error {}

/** How far in the future a token's `iat` may lie: the clock skew allowed between API hosts. */
export const IAT_SKEW_SECONDS = 60;

const isUuid = (v: unknown): boolean => typeof v === 'string' && UUID.test(v);

/**
 * Whether verified claims have the shape every token this service signs has (user, guest,
 * agent and MFA-enrollment tokens alike): whole-second `iat` and `exp` (a JSON number such as
 * 1e309 reads as Infinity and would never expire), UUIDs for `sub`, `tenant_id`, `jti`, `sid` when
 * present and `act.sub` when present, `subject_sid` only with `act`, `client_id` when present its agent (`act.sub`) or else its
 * tenant. Only the holder of a signing key could sign anything else;
 * refused here, such a token never reaches a query that expects these shapes.
 */
function wellFormed(c: AccessClaims): boolean {
  return (
    Number.isSafeInteger(c.iat) &&
    Number.isSafeInteger(c.exp) &&
    isUuid(c.sub) &&
    isUuid(c.tenant_id) &&
    isUuid(c.jti) &&
    (c.sid === undefined || isUuid(c.sid)) &&
    (c.act === undefined || (typeof c.act === 'object' && c.act !== null && isUuid(c.act.sub))) &&
    (c.subject_sid === undefined || (c.act !== undefined && isUuid(c.subject_sid))) &&
    (c.client_id === undefined || c.client_id === (c.act === undefined ? c.tenant_id : c.act.sub))
  );
}

/**
 * A JWT read without verifying it (RFC 7519 decode only), or null when it cannot be read.
 * jsonwebtoken's decode throws on a header that says `typ: JWT` over a payload that is not JSON:
 * from a client that is bad input (401), never a fault of ours.
 */
export function peekJwt(token: string): { header: jwt.JwtHeader; payload: jwt.JwtPayload } | null {
  try {
    const decoded = jwt.decode(token, { complete: true });
    if (!decoded || typeof decoded.payload !== 'object' || decoded.payload === null) return null;
    return { header: decoded.header, payload: decoded.payload };
  } catch {
    return null;
  }
}

/** Signs and verifies RS256 access tokens with the current signing key. */
@Injectable()
export class JwtService implements OnModuleDestroy {
  constructor(
    private readonly keys: SigningKeysService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** The `aud` of user access tokens (TOKEN_AUDIENCE, default PUBLIC_BASE_URL). */
  get audience(): string {
    return this.config.TOKEN_AUDIENCE;
  }

  /**
   * Signs an RS256 access token. The RSA operation runs on the calling thread (about 220 µs with
   * a 2048-bit KeyObject), not in libuv's threadpool: handing it to a pool thread and back costs
   * two cross-thread wake-ups, measured here at 30-70 µs of extra CPU per signature, and the API
   * runs one process per core (API_WORKERS), so no core is left idle that a pool thread could
   * use. The compact JWS is the one jsonwebtoken writes (header alg, typ, kid; RFC 7515 section
   * 7.1); jsonwebtoken verifies it (jwt.service.spec.ts checks both directions). Every token this
   * service signs is an access token: `typ: at+jwt` (RFC 9068 section 2.1), which resource
   * servers using a standard validator (oauth4webapi, jose with `typ`) require, with the claims
   * that profile requires (`client_id`: the agent's, or else the tenant id).
   */
  async sign(claims: ClaimsInput, ttlSeconds = this.config.ACCESS_TOKEN_TTL_SECONDS): Promise<{ token: string; claims: AccessClaims }> {
    const { kid, key } = this.keys.signingKey();
    const iat = Math.floor(Date.now() / 1000);
    const { act, client_id, tenant_id } = claims as Pick<AccessClaims, 'act' | 'client_id' | 'tenant_id'>;
    const full: AccessClaims = {
      iss: this.config.PUBLIC_BASE_URL,
      aud: this.config.TOKEN_AUDIENCE,
      ...claims,
      client_id: client_id ?? act?.sub ?? tenant_id,
      iat,
      exp: iat + ttlSeconds,
      jti: randomUUID(),
    } as AccessClaims;
    const input = `${base64url(JSON.stringify({ alg: 'RS256', typ: 'at+jwt', kid }))}.${base64url(JSON.stringify(full))}`;
    const signature = rsaSign('sha256', Buffer.from(input), key);
    return { token: `${input}.${signature.toString('base64url')}`, claims: full };
  }

  /**
   * Tokens whose signature and issuer were verified recently, by token string. A client sends one
   * access token many times, and RS256 verification is the largest CPU cost of a bearer call;
   * expiry and audience are still checked on every call and revocation by the caller. An entry
   * lives at most VERIFIED_CACHE_TTL_MS, the same order as the signing-key reload, each a jittered
   * lifetime so that tokens first seen together are not all verified again in the same instant,
   * and never past its token's `exp` (an expired token is not cached at all). An entry is used
   * only while its key is still trusted: a withdrawn key (keys:rotate --revoke-old) fails its
   * tokens at once, not when their entries expire. Entries past their time are deleted when looked
   * up, and every VERIFIED_CACHE_SWEEP_MS by `sweepVerified`: a server gone quiet does not hold up
   * to VERIFIED_CACHE_MAX dead entries until new tokens push them out.
   */
  private readonly verified = new Map<string, { claims: AccessClaims; until: number; kid: string }>();
  /**
   * The periodic sweep of `verified`, started with its first entry (a process that never verifies
   * a token, such as the worker or the CLI, has none); unref'd, so it never keeps a process alive.
   */
  private sweeper?: NodeJS.Timeout;

  /** Verifies signature, kid, alg, iss, exp (and aud unless an agent token names its own). */
  async verify(token: string, opts: { audience?: string | false } = {}): Promise<AccessClaims> {
    const now = Date.now();
    let claims = this.verified.get(token);
    if (!claims || claims.until <= now || !this.keys.trusts(claims.kid)) {
      if (claims) this.verified.delete(token);
      const checked = await this.verifySignature(token);
      // exp is a safe integer here (wellFormed): an entry ends with its token at the latest
      claims = { ...checked, until: Math.min(now + jittered(VERIFIED_CACHE_TTL_MS), checked.claims.exp * 1000) };
      if (claims.until > now) this.cacheVerified(token, claims);
    }
    const c = claims.claims;
    const nowSec = Math.floor(now / 1000);
    if (typeof c.exp !== 'number' || nowSec >= c.exp) throw new TokenVerificationError('jwt expired');
    if (typeof c.nbf === 'number' && nowSec < c.nbf) throw new TokenVerificationError('jwt not active');
    // issued later than now (beyond the clock skew between API hosts): not a token minted here
    if (c.iat > nowSec + IAT_SKEW_SECONDS) throw new TokenVerificationError('jwt not active (iat in the future)');
    if (opts.audience !== false) {
      const want = opts.audience ?? this.config.TOKEN_AUDIENCE;
      const aud = Array.isArray(c.aud) ? c.aud : [c.aud];
      if (!aud.includes(want)) throw new TokenVerificationError('jwt audience invalid');
    }
    return c;
  }

  private cacheVerified(token: string, entry: { claims: AccessClaims; until: number; kid: string }): void {
    if (this.verified.size >= VERIFIED_CACHE_MAX) this.verified.delete(this.verified.keys().next().value as string);
    this.verified.set(token, entry);
    if (!this.sweeper) {
      this.sweeper = setInterval(() => this.sweepVerified(), VERIFIED_CACHE_SWEEP_MS);
      this.sweeper.unref();
    }
  }

  /** Deletes the entries of `verified` past their time (at `now`, ms); answers how many went. */
  sweepVerified(now = Date.now()): number {
    let swept = 0;
    for (const [token, entry] of this.verified) {
      if (entry.until <= now) {
        this.verified.delete(token);
        swept++;
      }
    }
    return swept;
  }

  onModuleDestroy(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private async verifySignature(token: string): Promise<{ claims: AccessClaims; kid: string }> {
    const decoded = peekJwt(token);
    const kid = decoded?.header.kid;
    // `crit` names extensions the verifier must understand (RFC 7515 section 4.1.11): we sign none
    if (!kid || decoded.header.alg !== 'RS256' || decoded.header.crit !== undefined) throw new TokenVerificationError('bad header');
    const key = await this.keys.verificationKey(kid);
    if (!key) throw new TokenVerificationError('unknown kid');
    let claims: AccessClaims;
    try {
      claims = jwt.verify(token, key, { algorithms: ['RS256'], issuer: this.config.PUBLIC_BASE_URL }) as AccessClaims;
    } catch (e) {
      throw new TokenVerificationError((e as Error).message);
    }
    if (!wellFormed(claims)) throw new TokenVerificationError('jwt claims missing or malformed');
    return { claims, kid };
  }
}

const base64url = (json: string): string => Buffer.from(json).toString('base64url');

const VERIFIED_CACHE_TTL_MS = 30_000;
const VERIFIED_CACHE_MAX = 20_000;
/** How often `verified` is swept of entries past their time. */
const VERIFIED_CACHE_SWEEP_MS = 60_000;

/**
 * Resolves once the wall clock's whole second is past the second of `at` (now by default), so a
 * token signed afterwards has an `iat` (whole seconds) later than `at`: a revocation or restore
 * compared with `iat` then tells tokens issued before it from those issued after.
 */
export function pastSecondOf(at: Date = new Date()): Promise<void> {
  const wait = Math.floor(at.getTime() / 1000) * 1000 + 1000 - Date.now();
  return wait > 0 ? new Promise((resolve) => setTimeout(resolve, wait + 2)) : Promise.resolve();
}
