import { safeEqual } from '../crypto/tokens';
import { AppError } from '../errors/app-error';

// apart from metrics.ts (the API's /metrics), shared with the worker's own /metrics (worker-health.ts)
/**
 * METRICS_TOKEN, when set: only `Authorization: Bearer <METRICS_TOKEN>` reads metrics (compared in
 * constant time); the scheme name is case-insensitive (RFC 9110 section 11.1), followed by one or
 * more spaces (RFC 6750 section 2.1). The API's /metrics and the worker's.
 */
export function assertMetricsReader(token: string | undefined, authorization: string | undefined): void {
  const presented = typeof authorization === 'string' ? /^bearer +(.*)$/is.exec(authorization)?.[1] : undefined;
  if (token && !(presented !== undefined && safeEqual(presented, token))) {
    throw new AppError('auth/unauthorized', 'Authorization: Bearer <METRICS_TOKEN> is required', {
      headers: { 'WWW-Authenticate': 'Bearer realm="metrics"' },
    });
  }
}
