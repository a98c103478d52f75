import { randomUUID } from 'crypto';
import { Inject, Injectable } from '@nestjs/common';
import * as jwt from 'jsonwebtoken';
import { APP_CONFIG, AppConfig } from '../../config/config';
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
  role: string;
  is_anonymous: boolean;
  email?: string | null;
  email_verified?: boolean;
  act?: { sub: string };
  [extra: string]: unknown;
}

export type ClaimsInput = Omit<AccessClaims, 'iss' | 'aud' | 'exp' | 'iat' | 'jti'> & { aud?: string | string[] };

export class TokenVerificationError extends Error {}

/** Signs and verifies RS256 access tokens with the current signing key. */
@Injectable()
export class JwtService {
  constructor(
    private readonly keys: SigningKeysService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** The `aud` of user access tokens (TOKEN_AUDIENCE, default PUBLIC_BASE_URL). */
  get audience(): string {
    return this.config.TOKEN_AUDIENCE;
  }

  sign(claims: ClaimsInput, ttlSeconds = this.config.ACCESS_TOKEN_TTL_SECONDS): { token: string; claims: AccessClaims } {
    const { kid, key } = this.keys.signingKey();
    const iat = Math.floor(Date.now() / 1000);
    const full: AccessClaims = {
      iss: this.config.PUBLIC_BASE_URL,
      aud: this.config.TOKEN_AUDIENCE,
      ...claims,
      iat,
      exp: iat + ttlSeconds,
      jti: randomUUID(),
    } as AccessClaims;
    const token = jwt.sign(full, key, { algorithm: 'RS256', keyid: kid });
    return { token, claims: full };
  }

  /** Verifies signature, kid, alg, iss, exp (and aud unless an agent token names its own). */
  async verify(token: string, opts: { audience?: string | false } = {}): Promise<AccessClaims> {
    const decoded = jwt.decode(token, { complete: true });
    const kid = decoded && typeof decoded === 'object' ? decoded.header.kid : undefined;
    if (!kid || decoded?.header.alg !== 'RS256') throw new TokenVerificationError('bad header');
    const key = await this.keys.verificationKey(kid);
    if (!key) throw new TokenVerificationError('unknown kid');
    try {
      return jwt.verify(token, key, {
        algorithms: ['RS256'],
        issuer: this.config.PUBLIC_BASE_URL,
        ...(opts.audience === false ? {} : { audience: opts.audience ?? this.config.TOKEN_AUDIENCE }),
      }) as AccessClaims;
    } catch (e) {
      throw new TokenVerificationError((e as Error).message);
    }
  }
}
