import { Module } from '@nestjs/common';
import { DashboardAuthModule } from '../dashboard-auth/dashboard-auth.module';
import { OnboardingController } from './onboarding.controller';
import { SignupHandler } from './signup/signup.handler';
import { TurnstileService } from './turnstile.service';

/** Tenants: onboarding signup (the tenant, its owner, a dashboard session). */
@Module({
  imports: [DashboardAuthModule],
  controllers: [OnboardingController],
  providers: [SignupHandler, TurnstileService],
  exports: [TurnstileService],
})
export class TenantsModule {}
