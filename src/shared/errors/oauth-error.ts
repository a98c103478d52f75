import { withoutClientErrorStack } from './app-error';

/** RFC 6749 section 5.2 error for /oauth/* endpoints (a 4xx carries no stack trace, as AppError). */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly errorDescription?: string,
    readonly status = 400,
    readonly headers: Record<string, string> = {},
    /** the failure behind a 5xx (the standard, non-enumerable Error cause): logged, never answered */
    cause?: unknown,
  ) {
    const stackTraceLimit = withoutClientErrorStack(status);
    super(errorDescription ?? error, cause === undefined ? undefined : { cause });
    Error.stackTraceLimit = stackTraceLimit;
  }
}
