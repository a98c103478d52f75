/**
 * The catalog of stable error codes (problem+json `code`). Every AppError names one of these;
 * spec codes are used verbatim.
 */
export const ERROR_CATALOG = {
  'request/invalid': { status: 400, title: 'The request is invalid' },
  'request/malformed_json': { status: 400, title: 'The request body is not valid JSON' },
  'request/unsupported_media_type': { status: 415, title: 'Unsupported content type' },
  'request/too_large': { status: 413, title: 'The request body is too large' },
  'request/not_found': { status: 404, title: 'Not found' },
  'request/method_not_allowed': { status: 405, title: 'Method not allowed' },
  'request/invalid_cursor': { status: 400, title: 'The pagination cursor is invalid' },
  'idempotency/conflict': { status: 409, title: 'The idempotency key was used with another request' },
  'rate_limit/exceeded': { status: 429, title: 'Too many requests' },
  'auth/unauthorized': { status: 401, title: 'Authentication required' },
  'auth/invalid_token': { status: 401, title: 'The access token is invalid' },
  'auth/invalid_api_key': { status: 401, title: 'The API key is invalid or revoked' },
  'auth/invalid_credentials': { status: 401, title: 'Invalid email or password' },
  'auth/invalid_refresh_token': { status: 401, title: 'The refresh token is invalid' },
  'auth/tenant_mismatch': { status: 401, title: 'The API key and the token belong to different tenants' },
  'auth/forbidden': { status: 403, title: 'Not allowed' },
  'auth/step_up_required': { status: 403, title: 'A recent step-up verification is required' },
  'auth/reauth_required': { status: 403, title: 'Recent re-authentication required' },
  'auth/login_throttled': { status: 429, title: 'Too many failed sign-in attempts' },
  'csrf/invalid': { status: 403, title: 'Missing or invalid CSRF token' },
  'onboarding/bot_check_failed': { status: 400, title: 'The bot challenge failed' },
  'onboarding/email_exists': { status: 409, title: 'An account with this email already exists' },
  'tenant/not_found': { status: 404, title: 'Tenant not found' },
  'member/exists': { status: 409, title: 'This person is already a member' },
  'invite/invalid': { status: 400, title: 'The invitation is invalid or expired' },
  'api_key/not_found': { status: 404, title: 'API key not found' },
  'user/email_exists': { status: 409, title: 'An account with this email already exists' },
  'user/not_found': { status: 404, title: 'User not found' },
  'user/date_of_birth_required': { status: 400, title: 'A date of birth is required' },
  'anonymous/disabled': { status: 403, title: 'Anonymous sign-ins are disabled' },
  'anonymous/rate_limited': { status: 429, title: 'Too many guest sign-ins' },
  'anonymous/mau_exhausted': { status: 403, title: 'Monthly active user allowance exhausted' },
  'anonymous/already_claimed': { status: 409, title: 'The guest was already claimed' },
  'anonymous/confirmation_required': { status: 409, title: 'Confirmation required' },
  'server/unavailable': { status: 503, title: 'A dependency is unavailable' },
  'server/error': { status: 500, title: 'Internal server error' },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOG;
