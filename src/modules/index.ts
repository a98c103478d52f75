import { AccountSecurityModule } from './account-security/account-security.module';
import { AgentsModule } from './agents/agents.module';
import { ApiKeysModule } from './api-keys/api-keys.module';
import { GuestsModule } from './guests/guests.module';
import { MfaModule } from './mfa/mfa.module';
import { DashboardAuthModule } from './dashboard-auth/dashboard-auth.module';
import { OAuthModule } from './oauth/oauth.module';
import { SessionsModule } from './sessions/sessions.module';
import { TenantsModule } from './tenants/tenants.module';
import { UsersModule } from './users/users.module';
import { WebhooksModule } from './webhooks/webhooks.module';

/** Every bounded context with HTTP endpoints; each is one NestJS module. */
export const FEATURE_MODULES = [OAuthModule, TenantsModule, DashboardAuthModule, ApiKeysModule, SessionsModule, UsersModule, GuestsModule, AgentsModule, WebhooksModule, MfaModule, AccountSecurityModule];
