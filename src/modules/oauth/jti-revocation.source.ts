import { RevocationCheck, RevocationSource } from '../../shared/auth/token-revocation.service';
import { AccessClaims } from '../../shared/crypto/jwt.service';
import { revokedJtiKey } from './oauth.constants';

/** Access tokens revoked through POST /oauth/revoke (RFC 7009): refused by the bearer guard and introspection. */
export const jtiRevocationSource: RevocationSource = {
  keysFor(claims: AccessClaims): RevocationCheck[] {
    return typeof claims.jti === 'string' && claims.jti.length <= 64 ? [{ key: revokedJtiKey(claims.jti), reason: 'token_revoked' }] : [];
  },
};
