import { Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { TerminusModule } from '@nestjs/terminus';
import { ApiKeyPrefetchGuard } from './shared/auth/api-key-prefetch.guard';
import { ProblemFilter } from './shared/errors/problem.filter';
import { loggerModule } from './shared/http/logger';
import { NoBodyGuard } from './shared/http/no-body.guard';
import { OpsController } from './shared/http/ops.controller';
import { ReadinessLogger } from './shared/http/readiness-logger';
import { KernelModule } from './shared/kernel.module';
import { RateLimitGuard } from './shared/rate-limit/rate-limit.guard';
import { FEATURE_MODULES } from './modules';

/** The API process: every context's controllers plus the global filter and guards (API-key prefetch, rate limits, no body). */
@Module({
  imports: [loggerModule(), KernelModule, TerminusModule.forRoot({ logger: ReadinessLogger }), ...FEATURE_MODULES],
  controllers: [OpsController],
  providers: [
    { provide: APP_FILTER, useClass: ProblemFilter },
    // in this order: the API-key cache read starts first, to share the rate limiter's Redis write
    { provide: APP_GUARD, useClass: ApiKeyPrefetchGuard },
    { provide: APP_GUARD, useClass: RateLimitGuard },
    { provide: APP_GUARD, useClass: NoBodyGuard },
  ],
})
export class ApiModule {}
