import { Global, Module } from '@nestjs/common';
import { StepUpGuard } from './step-up.guard';
import { PassportModule } from '@nestjs/passport';
import { ApiKeyResolver, ApiKeyStrategy } from './api-key.strategy';
import { BearerAuthenticator, BearerStrategy, OptionalBearerStrategy } from './bearer.strategy';
import { DashboardGuard } from './dashboard.guard';
import { DashboardSessionService } from './dashboard-session.service';
import { ApiKeyGuard, BearerGuard, OptionalBearerGuard } from './guards';
import { TokenRevocationService } from './token-revocation.service';

const providers = [
  ApiKeyResolver,
  ApiKeyStrategy,
  BearerAuthenticator,
  BearerStrategy,
  OptionalBearerStrategy,
  TokenRevocationService,
  DashboardSessionService,
  DashboardGuard,
  ApiKeyGuard,
  BearerGuard,
  OptionalBearerGuard,
  StepUpGuard,
];

@Global()
@Module({ imports: [PassportModule], providers, exports: providers })
export class AuthKernelModule {}
