import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { activityCtes } from '../../sessions/activity.sql';
import { GetMeQuery, MeResponse } from './get-me.query';

@QueryHandler(GetMeQuery)
export class GetMeHandler implements IQueryHandler<GetMeQuery, MeResponse> {
  constructor(private readonly db: Db) {}

  async execute(q: GetMeQuery): Promise<MeResponse> {
    // last_active_at is written at most once a minute per user (guest retention)
    const [u] = await this.db.query<{
      id: string; email: string | null; email_verified: boolean; is_anonymous: boolean; role: string;
      created_at: Date; last_sign_in_at: Date | null; public_metadata: Record<string, unknown>;
    }>(
      `WITH ${activityCtes('$1')}
       SELECT id, email, email_verified, is_anonymous, role, created_at, last_sign_in_at, public_metadata
         FROM users WHERE id = $1 AND tenant_id = $2`,
      [q.userId, q.tenantId],
      'user_me',
    );
    if (!u) throw new AppError('auth/invalid_token', 'The user no longer exists');
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
