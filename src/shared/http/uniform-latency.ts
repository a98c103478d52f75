import { CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor, UseInterceptors, applyDecorators } from '@nestjs/common';
import { Observable, concatMap } from 'rxjs';
import { APP_CONFIG, AppConfig } from '../../config/config';

/**
 * Holds a successful answer until ENUMERATION_SAFE_MIN_RESPONSE_MS have passed since the handler
 * started, so the enumeration-safe endpoints (forgot password, resend verification, magic link,
 * email code; the dashboard's forgot password) answer after the same time whether the address has
 * an account or not: a known address writes a token, a mail and an audit row, an unknown one only
 * the audit row, which loopback timing could otherwise tell apart (about 1 ms). The floor sits well
 * above that work; the wait is a timer, no CPU. Errors (limits, validation) are not held: they do
 * not depend on whether the account exists.
 */
@Injectable()
export class UniformLatencyInterceptor implements NestInterceptor {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  intercept(_ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    const started = performance.now();
    const floor = this.config.ENUMERATION_SAFE_MIN_RESPONSE_MS;
    return next.handle().pipe(
      concatMap(async (answer) => {
        const left = floor - (performance.now() - started);
        if (left > 0) await new Promise((resolve) => setTimeout(resolve, Math.ceil(left)));
        return answer;
      }),
    );
  }
}

/** The route answers no sooner than ENUMERATION_SAFE_MIN_RESPONSE_MS (UniformLatencyInterceptor). */
export const UniformLatency = () => applyDecorators(UseInterceptors(UniformLatencyInterceptor));
