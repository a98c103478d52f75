import { Module } from '@nestjs/common';
import { OnboardingController } from './onboarding.controller';
import { SignupHandler } from './signup/signup.handler';
import { TurnstileService } from './turnstile.service';

/** Tenants: onboarding signup (the tenant, its owner, a dashboard session). */
@Module({
  controllers: [OnboardingController],
  providers: [SignupHandler, TurnstileService],
  exports: [TurnstileService],
})
export class TenantsModule {}
