import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { activityCtes, CURRENT_MONTH_SQL } from '../../sessions/activity.sql';
import { GetMeQuery, MeResponse } from './get-me.query';

@QueryHandler(GetMeQuery)
export class GetMeHandler implements IQueryHandler<GetMeQuery, MeResponse> {
  constructor(private readonly db: Db) {}

  async execute(q: GetMeQuery): Promise<MeResponse> {
    const [u] = await this.db.query<{
      id: string; email: string | null; email_verified: boolean; is_anonymous: boolean; role: string;
      created_at: Date; last_sign_in_at: Date | null; public_metadata: Record<string, unknown>; activity_due: boolean;
    }>(
      `SELECT id, email, email_verified, is_anonymous, role, created_at, last_sign_in_at, public_metadata,
              (last_active_at < now() - interval '1 minute' OR mau_month IS DISTINCT FROM ${CURRENT_MONTH_SQL}) AS activity_due
         FROM users WHERE id = $1 AND tenant_id = $2`,
      [q.userId, q.tenantId],
      'user_me',
    );
    if (!u) throw new AppError('auth/invalid_token', 'The user no longer exists');
    // last_active_at at most once a minute per user; the first activity of a month counts (MAU)
    if (u.activity_due) await this.db.query(`WITH ${activityCtes('$1')} SELECT 1`, [u.id], 'user_activity');
    return {
      id: u.id,
      email: u.email,
      email_verified: u.email_verified,
      is_anonymous: u.is_anonymous,
      role: u.role,
      created_at: u.created_at.toISOString(),
      last_sign_in_at: u.last_sign_in_at ? u.last_sign_in_at.toISOString() : null,
      public_metadata: u.public_metadata,
    };
  }
}
