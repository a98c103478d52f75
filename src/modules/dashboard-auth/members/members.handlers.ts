import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { Db, Queryable } from '../../../shared/db/db.service';
import { keysetPosition, Page, toPage } from '../../../shared/db/pagination';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { MemberResponse, MemberRole } from './members.dto';

interface MemberRow {
  user_id: string;
  email: string;
  role: MemberRole;
  created_at: Date;
}

const toResponse = (r: MemberRow): MemberResponse => ({ user_id: r.user_id, email: r.email, role: r.role, joined_at: r.created_at.toISOString() });

export class ListMembersQuery extends Query<Page<MemberResponse>> {
  constructor(readonly tenantId: string, readonly limit: number, readonly cursor?: string) {
    super();
  }
}

/** The tenant's members, newest first, cursor-paginated (any member may read them). */
@QueryHandler(ListMembersQuery)
export class ListMembersHandler implements IQueryHandler<ListMembersQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListMembersQuery): Promise<Page<MemberResponse>> {
    const list = `members:${q.tenantId}`;
    const pos = keysetPosition(q.cursor, list);
    const rows = await this.db.query<MemberRow & { created_at_text: string }>(
      `SELECT m.user_id, u.email, m.role, m.created_at, m.created_at::text AS created_at_text
         FROM tenant_members m JOIN dashboard_users u ON u.id = m.user_id
        WHERE m.tenant_id = $1 AND ($2::timestamptz IS NULL OR (m.created_at, m.user_id) < ($2::timestamptz, $3::uuid))
        ORDER BY m.created_at DESC, m.user_id DESC LIMIT $4`,
      [q.tenantId, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
    );
    return toPage(rows, q.limit, toResponse, (r) => [r.created_at_text, r.user_id], list);
  }
}

/**
 * Locks the tenant's membership for a change (the tenant row: every change of a tenant's members'
 * roles waits for the one before, so two owners demoting or removing each other at once cannot
 * leave the tenant without one) and reads the member and the number of owners. The actor's own
 * role is read again under the lock: an owner removed or demoted by a change that committed
 * while this request waited has no say any more. `self`: a member who is not an owner may act on
 * themself (leave). The erasure of an account (DeleteDashboardAccountHandler) takes the same lock
 * on each of its tenants, first, in id order.
 */
async function lockMember(tx: Queryable, actor: DashboardPrincipal, userId: string, opts: { self?: boolean } = {}): Promise<{ member: MemberRow; owners: number }> {
  const tenantId = actor.tenant!.id;
  await tx.query(`SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE`, [tenantId]);
  const [self] = await tx.query<{ role: MemberRole }>(`SELECT role FROM tenant_members WHERE tenant_id = $1 AND user_id = $2`, [tenantId, actor.userId]);
  if (!self) throw new AppError('tenant/not_found');
  if (self.role !== 'owner' && !(opts.self && userId === actor.userId)) throw new AppError('auth/forbidden', 'Only tenant owners may do this');
  const [member] = await tx.query<MemberRow>(
    `SELECT m.user_id, u.email, m.role, m.created_at FROM tenant_members m JOIN dashboard_users u ON u.id = m.user_id
      WHERE m.tenant_id = $1 AND m.user_id = $2`,
    [tenantId, userId],
  );
  if (!member) throw new AppError('member/not_found');
  const [{ owners }] = await tx.query<{ owners: number }>(`SELECT count(*)::int AS owners FROM tenant_members WHERE tenant_id = $1 AND role = 'owner'`, [tenantId]);
  return { member, owners };
}

const LAST_OWNER = 'A tenant keeps at least one owner: make another member an owner first';

/**
 * An owner who is removed or demoted takes back the invitations they sent and that are still
 * pending (acceptance also refuses them: see AcceptInviteHandler). Each withdrawal is audited as
 * an owner's withdrawal is (dashboard.invite_revoked), by the owner who made the change, with the
 * reason. (Also used by the erasure of an account, per tenant it leaves: DeleteDashboardAccountHandler.)
 */
export async function withdrawInvitations(events: EventsService, tx: Queryable, actor: DashboardPrincipal, userId: string): Promise<void> {
  await withdrawPendingInvitations(events, tx, { actorId: actor.userId, inviterId: userId, tenantId: actor.tenant!.id, reason: 'inviter_no_longer_owner' });
}

/**
 * Deletes the pending invitations `inviterId` sent (of one tenant, or of every tenant), each
 * audited as dashboard.invite_revoked by `actorId` with the reason; returns how many.
 */
export async function withdrawPendingInvitations(
  events: EventsService,
  tx: Queryable,
  o: { actorId: string; inviterId: string; tenantId?: string; reason: string },
): Promise<number> {
  const gone = await tx.query<{ id: string; tenant_id: string; role: string }>(
    `DELETE FROM dashboard_invites WHERE invited_by = $1 AND accepted_at IS NULL AND ($2::uuid IS NULL OR tenant_id = $2) RETURNING id, tenant_id, role`,
    [o.inviterId, o.tenantId ?? null],
  );
  for (const inv of gone) {
    await events.audit(tx, {
      tenantId: inv.tenant_id,
      type: 'dashboard.invite_revoked',
      actorType: 'dashboard_user',
      actorId: o.actorId,
      targetType: 'invite',
      targetId: inv.id,
      metadata: { role: inv.role, reason: o.reason },
    });
  }
  return gone.length;
}

/** The audit event of a change of a member, by an owner of the tenant or the member themself (medium severity). */
export function memberChanged(events: EventsService, tx: Queryable, actor: DashboardPrincipal, userId: string, type: string, metadata: Record<string, unknown>): Promise<void> {
  return events.audit(tx, { tenantId: actor.tenant!.id, type, actorType: 'dashboard_user', actorId: actor.userId, targetType: 'dashboard_user', targetId: userId, severity: 'medium', metadata });
}

export class ChangeMemberRoleCommand extends Command<MemberResponse> {
  constructor(readonly actor: DashboardPrincipal, readonly userId: string, readonly role: MemberRole) {
    super();
  }
}

/** Owner only, after a reauth: changes a member's role; the last owner cannot step down. */
@CommandHandler(ChangeMemberRoleCommand)
export class ChangeMemberRoleHandler implements ICommandHandler<ChangeMemberRoleCommand> {
  constructor(private readonly db: Db, private readonly events: EventsService) {}

  async execute(cmd: ChangeMemberRoleCommand): Promise<MemberResponse> {
    const tenantId = cmd.actor.tenant!.id;
    return this.db.tx(async (tx) => {
      const { member, owners } = await lockMember(tx, cmd.actor, cmd.userId);
      // the same role again changes nothing: no update, no audit event
      if (member.role === cmd.role) return toResponse(member);
      if (member.role === 'owner' && owners <= 1) throw new AppError('member/last_owner', LAST_OWNER);
      // the invitations first: an acceptance locks its invitation, then the inviter's membership
      if (member.role === 'owner') await withdrawInvitations(this.events, tx, cmd.actor, cmd.userId);
      await tx.query(`UPDATE tenant_members SET role = $3 WHERE tenant_id = $1 AND user_id = $2`, [tenantId, cmd.userId, cmd.role]);
      await memberChanged(this.events, tx, cmd.actor, cmd.userId, 'dashboard.member_role_changed', { from: member.role, to: cmd.role });
      return toResponse({ ...member, role: cmd.role });
    });
  }
}

export class RemoveMemberCommand extends Command<void> {
  constructor(readonly actor: DashboardPrincipal, readonly userId: string) {
    super();
  }
}

/**
 * After a reauth, an owner removes a member, or any member leaves (removes themself), unless the
 * last owner. The person's dashboard sessions lose the tenant at their next request (memberships
 * are read per request); their account and other memberships stay. Audited as
 * dashboard.member_removed, or dashboard.member_left when the member left.
 */
@CommandHandler(RemoveMemberCommand)
export class RemoveMemberHandler implements ICommandHandler<RemoveMemberCommand> {
  constructor(private readonly db: Db, private readonly events: EventsService) {}

  async execute(cmd: RemoveMemberCommand): Promise<void> {
    const tenantId = cmd.actor.tenant!.id;
    await this.db.tx(async (tx) => {
      const { member, owners } = await lockMember(tx, cmd.actor, cmd.userId, { self: true });
      if (member.role === 'owner' && owners <= 1) throw new AppError('member/last_owner', LAST_OWNER);
      // the invitations first: an acceptance locks its invitation, then the inviter's membership
      await withdrawInvitations(this.events, tx, cmd.actor, cmd.userId);
      await tx.query(`DELETE FROM tenant_members WHERE tenant_id = $1 AND user_id = $2`, [tenantId, cmd.userId]);
      const left = cmd.userId === cmd.actor.userId;
      await memberChanged(this.events, tx, cmd.actor, cmd.userId, left ? 'dashboard.member_left' : 'dashboard.member_removed', { role: member.role });
    });
  }
}
