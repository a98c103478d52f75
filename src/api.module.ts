import { Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { TerminusModule } from '@nestjs/terminus';
import { ProblemFilter } from './shared/errors/problem.filter';
import { loggerModule } from './shared/http/logger';
import { NoBodyGuard } from './shared/http/no-body.guard';
import { OpsController } from './shared/http/ops.controller';
import { KernelModule } from './shared/kernel.module';
import { RateLimitGuard } from './shared/rate-limit/rate-limit.guard';
import { FEATURE_MODULES } from './modules';

/** The API process: every context's controllers plus the global filter, the rate-limit guard and the no-body guard. */
@Module({
  imports: [loggerModule(), KernelModule, TerminusModule, ...FEATURE_MODULES],
  controllers: [OpsController],
  providers: [
    { provide: APP_FILTER, useClass: ProblemFilter },
    { provide: APP_GUARD, useClass: RateLimitGuard },
    { provide: APP_GUARD, useClass: NoBodyGuard },
  ],
})
export class ApiModule {}
