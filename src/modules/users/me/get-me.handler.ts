import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { UserProfileCache } from '../../../shared/cache/user-profile.cache';
import { Db } from '../../../shared/db/db.service';
import { InvalidTokenError } from '../../../shared/errors/app-error';
import { activityCtes } from '../../sessions/activity.sql';
import { GetMeQuery, MeResponse } from './get-me.query';

type CachedMe = MeResponse & { tenant_id: string };

/**
 * The current user, from the Redis profile cache when it holds the user (see UserProfileCache
 * for why a cached profile is never older than the last write the service answered).
 */
@QueryHandler(GetMeQuery)
export class GetMeHandler implements IQueryHandler<GetMeQuery, MeResponse> {
  constructor(
    private readonly db: Db,
    private readonly cache: UserProfileCache<CachedMe>,
  ) {}

  async execute(q: GetMeQuery): Promise<MeResponse> {
    // both keys were read by the bearer guard (BearerPrefetch on the route): usually no Redis call here
    const [slot, activityDue] = await Promise.all([
      this.cache.lookupPrefetched(q.userId, q.prefetched),
      this.cache.activityWindowOpen(q.userId, q.prefetched),
    ]);
    const cached = slot.value;
    const me = cached && cached.tenant_id === q.tenantId ? strip(cached) : await this.load(q, slot.guard);
    // a guest holds the tenant's default role until registration (spec 5 rule 5): its token says which
    if (me.is_anonymous && q.tokenRole) me.role = q.tokenRole;
    // an agent acts with the narrowed scope it was granted (spec 4.3), as at an OIDC userinfo
    // endpoint: the address is the `email` scope's; the profile (public_metadata, where apps keep
    // names, phone numbers, addresses; the last sign-in) the `profile` scope's. The contract's
    // fields stay, empty as for a guest without them; the user's own token sees the whole profile
    if (q.delegatedScopes && !q.delegatedScopes.includes('email')) {
      me.email = null;
      me.email_verified = false;
    }
    if (q.delegatedScopes && !q.delegatedScopes.includes('profile')) {
      me.public_metadata = {};
      me.last_sign_in_at = null;
    }
    // last_active_at at most once a minute per user; the first activity of a month counts (MAU)
    if (activityDue) await this.db.query(`WITH ${activityCtes('$1')} SELECT 1`, [q.userId], 'user_activity');
    return me;
  }

  private async load(q: GetMeQuery, guard: string | null): Promise<MeResponse> {
    const [u] = await this.db.query<{
      id: string; email: string | null; email_verified: boolean; is_anonymous: boolean; role: string;
      created_at: Date; last_sign_in_at: Date | null; public_metadata: Record<string, unknown>;
    }>(
      `SELECT id, email, email_verified, is_anonymous, role, created_at, last_sign_in_at, public_metadata
         FROM users WHERE id = $1 AND tenant_id = $2`,
      [q.userId, q.tenantId],
      'user_me',
    );
    if (!u) throw new InvalidTokenError('invalid_token', 'The user no longer exists');
    const me: MeResponse = {
      id: u.id,
      email: u.email,
      email_verified: u.email_verified,
      is_anonymous: u.is_anonymous,
      role: u.role,
      created_at: u.created_at.toISOString(),
      last_sign_in_at: u.last_sign_in_at ? u.last_sign_in_at.toISOString() : null,
      public_metadata: u.public_metadata,
    };
    await this.cache.fill(q.userId, { ...me, tenant_id: q.tenantId }, guard);
    return me;
  }
}

function strip({ tenant_id: _tenant, ...me }: CachedMe): MeResponse {
  return me;
}
