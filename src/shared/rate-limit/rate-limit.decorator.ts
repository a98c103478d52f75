import { SetMetadata } from '@nestjs/common';
import { AppConfig } from '../../config/config';
import { ErrorCode } from '../errors/error-codes';

/** What a limit counts by: the client address, the X-API-Key presented, or both. */
export type LimitSubject = 'ip' | 'api_key';

export interface RateLimitRule {
  bucket: string;
  by: LimitSubject;
  limit: (config: AppConfig) => number;
  windowSeconds: number;
  code?: ErrorCode;
}

export const RATE_LIMIT_RULES = 'authp:rate-limit-rules';

/** Declares limits on a route; the global RateLimitGuard enforces them (one mechanism). */
export const RateLimit = (...rules: RateLimitRule[]) => SetMetadata(RATE_LIMIT_RULES, rules);
