/** RFC 8693 section 2.1: the token-exchange grant type (the only grant of POST /oauth/token). */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
/** RFC 8693 section 3: the only subject, requested and issued token type (spec 4.3). */
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** spec 8: agent token lifetimes. */
export const AGENT_TOKEN_DEFAULT_TTL_SECONDS = 300;
export const AGENT_TOKEN_MAX_TTL_SECONDS = 900;

/** spec 8: token exchanges per agent client per minute (agent_settings.rate_limits.token_exchange_per_min overrides, at most 600). */
export const TOKEN_EXCHANGE_PER_CLIENT_PER_MIN = 60;
/** spec 8: token exchanges per subject token jti per minute. */
export const TOKEN_EXCHANGE_PER_SUBJECT_JTI_PER_MIN = 10;

/** Redis key of an access token revoked through POST /oauth/revoke (RFC 7009), kept until it expires. */
export const revokedJtiKey = (jti: string) => `revoked:jti:${jti}`;
/** Redis key of whether a tenant has any such token that has not expired ("1") or none ("0"). */
export const revokedJtiTenantKey = (tenantId: string) => `revoked:jti-tenant:${tenantId}`;
