import { Global, Module } from '@nestjs/common';
import { RateLimitGuard } from './rate-limit.guard';
import { LoginThrottleService } from './login-throttle.service';
import { RateLimitService } from './rate-limit.service';

@Global()
@Module({ providers: [RateLimitService, RateLimitGuard, LoginThrottleService], exports: [RateLimitService, RateLimitGuard, LoginThrottleService] })
export class RateLimitModule {}
