import { InitialSchema1763700000000 } from './1763700000000-initial-schema';
import { TenantSettingsAndClients1763750000000 } from './1763750000000-tenant-settings-and-clients';
import { Agents1763900000000 } from './1763900000000-agents';
import { Guests1763760000000 } from './1763760000000-guests';
import { AccountSecurity1763800000000 } from './1763800000000-account-security';
import { Mfa1763810000000 } from './1763810000000-mfa';
import { Webhooks1763910000000 } from './1763910000000-webhooks';
import { SweepIndexes1764000000000 } from './1764000000000-sweep-indexes';
import { SessionSweepIndex1764100000000 } from './1764100000000-session-sweep-index';
import { MfaChallengeOauthParams1764200000000 } from './1764200000000-mfa-challenge-oauth-params';
import { PasswordProven1764300000000 } from './1764300000000-password-proven';
import { OutboxSettled1764400000000 } from './1764400000000-outbox-settled';
import { RevokedAccessTokens1764500000000 } from './1764500000000-revoked-access-tokens';
import { RevokedAccessTokensTenant1764600000000 } from './1764600000000-revoked-access-tokens-tenant';
import { EmailNfkc1764700000000 } from './1764700000000-email-nfkc';
import { HotParentKeys1764800000000 } from './1764800000000-hot-parent-keys';
import { WebhookDeliveryLease1764900000000 } from './1764900000000-webhook-delivery-lease';
import { SigningKeyActiveFrom1765000000000 } from './1765000000000-signing-key-active-from';
import { EmailIdn1765100000000 } from './1765100000000-email-idn';
import { EmailNfkcSpelling1765200000000 } from './1765200000000-email-nfkc-spelling';
import { EmailDomainCase1765300000000 } from './1765300000000-email-domain-case';
import { DashboardInvitePending1765360000000 } from './1765360000000-dashboard-invite-pending';
import { MaintenanceRuns1765400000000 } from './1765400000000-maintenance-runs';
import { MaintenanceRunLease1765500000000 } from './1765500000000-maintenance-run-lease';
import { SessionAuthenticatedAt1765600000000 } from './1765600000000-session-authenticated-at';
import { DashboardPasswordResets1765700000000 } from './1765700000000-dashboard-password-resets';
import { WebhookSecretRotation1765800000000 } from './1765800000000-webhook-secret-rotation';
import { LookupIndexes1765900000000 } from './1765900000000-lookup-indexes';
import { RetentionIndexes1766000000000 } from './1766000000000-retention-indexes';
import { AgentLogoCanonical1766100000000 } from './1766100000000-agent-logo-canonical';
import { RecoveryCodeKeyId1766200000000 } from './1766200000000-recovery-code-key-id';
import { WebhookEnabledAt1766300000000 } from './1766300000000-webhook-enabled-at';
import { MfaSetupBy1766400000000 } from './1766400000000-mfa-setup-by';

/** Every migration, in order. A new migration is added here (explicit: no globbing at runtime). */
export const ALL_MIGRATIONS = [
  InitialSchema1763700000000,
  TenantSettingsAndClients1763750000000,
  Guests1763760000000,
  Agents1763900000000,
  Webhooks1763910000000,
  Mfa1763810000000,
  AccountSecurity1763800000000,
  SweepIndexes1764000000000,
  SessionSweepIndex1764100000000,
  MfaChallengeOauthParams1764200000000,
  PasswordProven1764300000000,
  OutboxSettled1764400000000,
  RevokedAccessTokens1764500000000,
  RevokedAccessTokensTenant1764600000000,
  EmailNfkc1764700000000,
  HotParentKeys1764800000000,
  WebhookDeliveryLease1764900000000,
  SigningKeyActiveFrom1765000000000,
  EmailIdn1765100000000,
  EmailNfkcSpelling1765200000000,
  EmailDomainCase1765300000000,
  DashboardInvitePending1765360000000,
  MaintenanceRuns1765400000000,
  MaintenanceRunLease1765500000000,
  SessionAuthenticatedAt1765600000000,
  DashboardPasswordResets1765700000000,
  WebhookSecretRotation1765800000000,
  LookupIndexes1765900000000,
  RetentionIndexes1766000000000,
  AgentLogoCanonical1766100000000,
  RecoveryCodeKeyId1766200000000,
  WebhookEnabledAt1766300000000,
  MfaSetupBy1766400000000,
];
