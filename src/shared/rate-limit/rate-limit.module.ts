import { Global, Module } from '@nestjs/common';
import { RateLimitGuard } from './rate-limit.guard';
import { LoginThrottleService } from './login-throttle.service';
import { RateLimitService } from './rate-limit.service';
import { MailLimits } from './mail-limits.service';

@Global()
@Module({ providers: [RateLimitService, RateLimitGuard, LoginThrottleService, MailLimits], exports: [RateLimitService, RateLimitGuard, LoginThrottleService, MailLimits] })
export class RateLimitModule {}
