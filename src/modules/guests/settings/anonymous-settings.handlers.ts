import { requireInvalidated } from '../../../shared/cache/read-through.cache';
import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { ApiKeyCache } from '../../../shared/cache/api-key.cache';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { AnonymousSettingsResponse, UpdateAnonymousSettingsDto, USER_ROLES, UserRole } from './anonymous-settings.dto';

export const CONFIRM_HEADER_VALUE = 'privileged-default-role';

export class GetAnonymousSettingsQuery extends Query<AnonymousSettingsResponse> {
  constructor(readonly tenantId: string) {
    super();
  }
}

@QueryHandler(GetAnonymousSettingsQuery)
export class GetAnonymousSettingsHandler implements IQueryHandler<GetAnonymousSettingsQuery> {
  constructor(private readonly db: Db) {}
  async execute(q: GetAnonymousSettingsQuery): Promise<AnonymousSettingsResponse> {
    const [row] = await this.db.query<AnonymousSettingsResponse>(
      `SELECT anonymous_signins_enabled, anonymous_user_ttl_days, default_user_role FROM tenants WHERE id = $1`,
      [q.tenantId],
    );
    return row;
  }
}

export class UpdateAnonymousSettingsCommand extends Command<AnonymousSettingsResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly patch: UpdateAnonymousSettingsDto,
    readonly confirmHeader: string | undefined,
  ) {
    super();
  }
}

const rank = (role: UserRole | null): number => (role ? USER_ROLES.indexOf(role) : 0);

/**
 * spec 5 rule 5: guests get the tenant's current default role, the existing ones on their next
 * refresh too, even while guest sign-ins are disabled (spec 3.1: they keep refreshing). So any
 * change that gives guests (new ones, or existing ones once guests have ever been enabled) a role
 * broader than read_only and broader than the role they have now needs
 * `X-Service-Confirm: privileged-default-role` (409 otherwise): the first enabling with such a
 * role, widening it while enabled, and widening it while disabled. Disabling, narrowing, keeping
 * the role (re-enabling with the role guests already had) and other fields need nothing.
 */
@CommandHandler(UpdateAnonymousSettingsCommand)
export class UpdateAnonymousSettingsHandler implements ICommandHandler<UpdateAnonymousSettingsCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly keys: ApiKeyCache,
  ) {}

  async execute(cmd: UpdateAnonymousSettingsCommand): Promise<AnonymousSettingsResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const next = await this.db.tx(async (tx) => {
      const [cur] = await tx.query<AnonymousSettingsResponse & { anonymous_ever_enabled: boolean }>(
        `SELECT anonymous_signins_enabled, anonymous_user_ttl_days, default_user_role, anonymous_ever_enabled FROM tenants WHERE id = $1 FOR UPDATE`,
        [tenantId],
      );
      const next = {
        anonymous_signins_enabled: cmd.patch.anonymous_signins_enabled ?? cur.anonymous_signins_enabled,
        anonymous_user_ttl_days: cmd.patch.anonymous_user_ttl_days ?? cur.anonymous_user_ttl_days,
        default_user_role: (cmd.patch.default_user_role ?? cur.default_user_role) as UserRole,
      };
      // guests exist (or may: enabled once) and hold the current role; after the change, guests
      // (new or existing) get the new one
      const guestsBefore = cur.anonymous_signins_enabled || cur.anonymous_ever_enabled;
      const guestsAfter = next.anonymous_signins_enabled || cur.anonymous_ever_enabled;
      const roleBefore = guestsBefore ? cur.default_user_role : null;
      const needsConfirmation =
        guestsAfter && rank(next.default_user_role) > rank('read_only') && rank(next.default_user_role) > rank(roleBefore);
      if (needsConfirmation && cmd.confirmHeader !== CONFIRM_HEADER_VALUE) {
        throw new AppError(
          'anonymous/confirmation_required',
          `Guests would get the role "${next.default_user_role}". Send X-Service-Confirm: ${CONFIRM_HEADER_VALUE} to confirm, or set default_user_role to read_only`,
        );
      }
      // the same settings again change nothing: no update, no audit event (the caches are told
      // again all the same: an earlier change whose invalidation failed answered 503)
      if (
        next.anonymous_signins_enabled === cur.anonymous_signins_enabled &&
        next.anonymous_user_ttl_days === cur.anonymous_user_ttl_days &&
        next.default_user_role === cur.default_user_role
      )
        return next;
      await tx.query(
        `UPDATE tenants SET anonymous_signins_enabled = $2, anonymous_user_ttl_days = $3, default_user_role = $4,
                anonymous_ever_enabled = anonymous_ever_enabled OR $2, updated_at = now() WHERE id = $1`,
        [tenantId, next.anonymous_signins_enabled, next.anonymous_user_ttl_days, next.default_user_role],
      );
      await this.events.audit(tx, {
        tenantId,
        type: 'tenant.anonymous_settings_updated',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'tenant',
        targetId: tenantId,
        severity: needsConfirmation ? 'medium' : 'info',
        // true exactly when this change needed (and carried) X-Service-Confirm
        metadata: { before: { ...cur, anonymous_ever_enabled: undefined }, after: next, confirmed_privileged_role: needsConfirmation },
      });
      return next;
    });
    // the tenant's API keys carry these settings (guest sign-in reads them from the key)
    requireInvalidated(await this.keys.invalidateTenant(this.db, tenantId));
    return next;
  }
}
