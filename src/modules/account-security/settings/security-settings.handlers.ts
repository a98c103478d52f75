import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { EnvelopeCipher } from '../../../shared/crypto/envelope-cipher';
import { Db, Queryable } from '../../../shared/db/db.service';
import { EventsService, Severity } from '../../../shared/events/events.service';
import { AMR_EMAIL_OTP, AMR_MAGIC_LINK } from '../account-security.constants';
import { SecuritySettingsResponse, UpdateSecuritySettingsDto } from './security-settings.dto';

/** AAD of the envelope of tenants.byok_twilio_auth_token_enc (the SMS module decrypts with it). */
export function twilioAuthTokenAad(tenantId: string): string {
  return `byok_twilio_auth_token:${tenantId}`;
}

interface Row extends Omit<SecuritySettingsResponse, 'mfa_required_since' | 'byok_twilio_auth_token_set'> {
  mfa_required_since: Date | null;
  byok_twilio_auth_token_enc: string | null;
}

const COLUMNS = `mfa_policy, mfa_grace_period_days, mfa_required_since, block_disposable_emails, block_email_subaddresses,
  automatic_account_linking_enabled, explicit_account_linking_enabled, sms_otp_enabled, sms_otp_monthly_cap,
  byok_twilio_account_sid, byok_twilio_auth_token_enc, byok_twilio_messaging_service_sid, magic_link_enabled,
  email_otp_enabled, email_otp_captcha_required, minor_protection_enabled, sms_allowed_countries`;

/** Plain columns a PATCH writes as given (the BYOK token and the country list have their own rules). */
const PLAIN = [
  'mfa_policy',
  'mfa_grace_period_days',
  'block_disposable_emails',
  'block_email_subaddresses',
  'automatic_account_linking_enabled',
  'explicit_account_linking_enabled',
  'sms_otp_enabled',
  'sms_otp_monthly_cap',
  'byok_twilio_account_sid',
  'byok_twilio_messaging_service_sid',
  'magic_link_enabled',
  'email_otp_enabled',
] as const;

/**
 * Whether a change weakens the tenant's protection (audited with a higher severity, for the
 * alerts a SIEM keys on it): MFA made optional, or its grace lengthened while it is required (a
 * user past the old deadline refreshes again); a sign-up email check switched off; automatic
 * account linking switched on (an identity provider's verified address then signs into the
 * account); SMS codes allowed to more countries (none listed: every one). `cur` and `next`: the
 * settings before and after the change.
 */
function weakens(field: string, c: { from: unknown; to: unknown }, cur: Row, next: Row): boolean {
  switch (field) {
    case 'mfa_policy':
      return c.to === 'optional';
    case 'mfa_grace_period_days':
      // while required already: switching to required with it starts a grace nobody was in
      return cur.mfa_policy === 'required' && next.mfa_policy === 'required' && Number(c.to) > Number(c.from);
    case 'block_disposable_emails':
    case 'block_email_subaddresses':
      return c.to === false;
    case 'automatic_account_linking_enabled':
      return c.to === true;
    case 'sms_allowed_countries': {
      const to = c.to as string[] | null;
      const from = new Set((c.from as string[] | null) ?? []);
      return !to?.length || (from.size > 0 && to.some((country) => !from.has(country)));
    }
    default:
      return false;
  }
}

function toResponse(r: Row): SecuritySettingsResponse {
  const { byok_twilio_auth_token_enc, mfa_required_since, ...rest } = r;
  return {
    ...rest,
    mfa_required_since: mfa_required_since ? mfa_required_since.toISOString() : null,
    byok_twilio_auth_token_set: byok_twilio_auth_token_enc !== null,
    sms_allowed_countries: r.sms_allowed_countries?.length ? r.sms_allowed_countries : null,
  };
}

async function read(db: Queryable, tenantId: string, lock = false): Promise<Row> {
  const [row] = await db.query<Row>(`SELECT ${COLUMNS} FROM tenants WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [tenantId]);
  return row;
}

export class GetSecuritySettingsQuery extends Query<SecuritySettingsResponse> {
  constructor(readonly tenantId: string) {
    super();
  }
}

@QueryHandler(GetSecuritySettingsQuery)
export class GetSecuritySettingsHandler implements IQueryHandler<GetSecuritySettingsQuery, SecuritySettingsResponse> {
  constructor(private readonly db: Db) {}
  async execute(q: GetSecuritySettingsQuery): Promise<SecuritySettingsResponse> {
    return toResponse(await read(this.db, q.tenantId));
  }
}

export class UpdateSecuritySettingsCommand extends Command<SecuritySettingsResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly patch: UpdateSecuritySettingsDto,
  ) {
    super();
  }
}

/**
 * spec 2.8 (owner only): partial update under a row lock. `mfa_policy` switching to required
 * stamps mfa_required_since (the grace period of users without MFA starts then); back to
 * optional clears it. The BYOK auth token is stored envelope-encrypted (AAD bound to the
 * tenant) and never returned. An empty country list is stored as null (no narrowing). One audit
 * event per update that changes something, with the changed fields (the token as set/cleared).
 */
@CommandHandler(UpdateSecuritySettingsCommand)
export class UpdateSecuritySettingsHandler implements ICommandHandler<UpdateSecuritySettingsCommand, SecuritySettingsResponse> {
  constructor(
    private readonly db: Db,
    private readonly cipher: EnvelopeCipher,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: UpdateSecuritySettingsCommand): Promise<SecuritySettingsResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const p = cmd.patch;
    return this.db.tx(async (tx) => {
      const cur = await read(tx, tenantId, true);
      const next: Row = { ...cur };
      const changes: Record<string, { from: unknown; to: unknown }> = {};
      for (const k of PLAIN) {
        const v = p[k];
        if (v === undefined || v === cur[k]) continue;
        (next as unknown as Record<string, unknown>)[k] = v;
        changes[k] = { from: cur[k], to: v };
      }
      if (p.sms_allowed_countries !== undefined) {
        const list = p.sms_allowed_countries?.length ? [...new Set(p.sms_allowed_countries)] : null;
        if (JSON.stringify(list) !== JSON.stringify(cur.sms_allowed_countries?.length ? cur.sms_allowed_countries : null)) {
          next.sms_allowed_countries = list;
          changes.sms_allowed_countries = { from: cur.sms_allowed_countries, to: list };
        }
      }
      if (p.byok_twilio_auth_token !== undefined) {
        const was = cur.byok_twilio_auth_token_enc !== null;
        next.byok_twilio_auth_token_enc = p.byok_twilio_auth_token === null ? null : this.cipher.encrypt(p.byok_twilio_auth_token, twilioAuthTokenAad(tenantId));
        if (was || p.byok_twilio_auth_token !== null) {
          changes.byok_twilio_auth_token = { from: was ? 'set' : 'unset', to: p.byok_twilio_auth_token === null ? 'unset' : was ? 'replaced' : 'set' };
        }
      }
      if (!Object.keys(changes).length) return toResponse(cur);

      const [saved] = await tx.query<Row>(
        `UPDATE tenants SET mfa_policy = $2, mfa_grace_period_days = $3,
                mfa_required_since = CASE WHEN $4::boolean THEN (CASE WHEN $2 = 'required' THEN now() ELSE NULL END) ELSE mfa_required_since END,
                block_disposable_emails = $5, block_email_subaddresses = $6, automatic_account_linking_enabled = $7,
                explicit_account_linking_enabled = $8, sms_otp_enabled = $9, sms_otp_monthly_cap = $10,
                byok_twilio_account_sid = $11, byok_twilio_auth_token_enc = $12, byok_twilio_messaging_service_sid = $13,
                magic_link_enabled = $14, email_otp_enabled = $15, sms_allowed_countries = $16, updated_at = now()
          WHERE id = $1 RETURNING ${COLUMNS}`,
        [
          tenantId,
          next.mfa_policy,
          next.mfa_grace_period_days,
          Boolean(changes.mfa_policy),
          next.block_disposable_emails,
          next.block_email_subaddresses,
          next.automatic_account_linking_enabled,
          next.explicit_account_linking_enabled,
          next.sms_otp_enabled,
          next.sms_otp_monthly_cap,
          next.byok_twilio_account_sid,
          next.byok_twilio_auth_token_enc,
          next.byok_twilio_messaging_service_sid,
          next.magic_link_enabled,
          next.email_otp_enabled,
          next.sms_allowed_countries,
        ],
      );
      // a method switched off voids what it had sent: switched on again, its earlier links and
      // codes (up to their 15 or 10 minutes) would sign in once more, past the owner's decision.
      // So do the MFA challenges it opened: the second step would still complete its sign-in
      const voidChallenges = (firstFactorAmr: string[]) =>
        tx.query(
          `UPDATE mfa_challenges SET used_at = now()
            WHERE tenant_id = $1 AND kind = 'login' AND first_factor_amr = $2::text[] AND used_at IS NULL AND expires_at > now()`,
          [tenantId, firstFactorAmr],
        );
      if (changes.magic_link_enabled && !next.magic_link_enabled) {
        await tx.query(
          `UPDATE account_tokens SET used_at = now()
            WHERE tenant_id = $1 AND kind IN ('magic_link', 'step_up_magic_link') AND used_at IS NULL AND expires_at > now()`,
          [tenantId],
        );
        await voidChallenges(AMR_MAGIC_LINK);
      }
      if (changes.email_otp_enabled && !next.email_otp_enabled) {
        await tx.query(`UPDATE email_otp_codes SET consumed_at = now() WHERE tenant_id = $1 AND consumed_at IS NULL AND expires_at > now()`, [tenantId]);
        await voidChallenges(AMR_EMAIL_OTP);
      }
      const weakening = Object.entries(changes).some(([k, c]) => weakens(k, c, cur, next));
      const severity: Severity = weakening ? 'medium' : 'info';
      await this.events.audit(tx, {
        tenantId,
        type: 'tenant.security_settings_updated',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'tenant',
        targetId: tenantId,
        severity,
        metadata: { changed: Object.keys(changes), changes },
      });
      return toResponse(saved);
    });
  }
}
