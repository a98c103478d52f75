/** RFC 6749 section 5.2 error for /oauth/* endpoints. */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly errorDescription?: string,
    readonly status = 400,
    readonly headers: Record<string, string> = {},
  ) {
    super(errorDescription ?? error);
  }
}
