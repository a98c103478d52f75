import { ApiProperty } from '@nestjs/swagger';
import { Queryable } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';

/**
 * An end user as the tenant's dashboard sees it (GET .../users, GET .../users/{userId}): no
 * password hash, date of birth, metadata or role, only what an administrator needs to find and
 * identify the account.
 */
export interface EndUserResponse {
  id: string;
  email: string | null;
  email_verified: boolean;
  is_anonymous: boolean;
  created_at: string;
  last_sign_in_at: string | null;
}

export class EndUserResponseDto implements EndUserResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ type: String, format: 'email', nullable: true, description: 'as stored (NFKC, case kept); null for guests' }) email!: string | null;
  @ApiProperty({ description: 'false for guests' }) email_verified!: boolean;
  @ApiProperty({ description: 'a guest (anonymous sign-in) not claimed yet' }) is_anonymous!: boolean;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) last_sign_in_at!: string | null;
}

export interface EndUserRow {
  id: string;
  email: string | null;
  email_verified: boolean;
  is_anonymous: boolean;
  created_at: Date;
  last_sign_in_at: Date | null;
}

/** The columns of EndUserRow (never password_hash, date_of_birth_enc, public_metadata). */
export const END_USER_COLUMNS = 'id, email, email_verified, is_anonymous, created_at, last_sign_in_at';

export const toEndUserResponse = (r: EndUserRow): EndUserResponse => ({
  id: r.id,
  email: r.email,
  email_verified: r.email_verified,
  is_anonymous: r.is_anonymous,
  created_at: r.created_at.toISOString(),
  last_sign_in_at: r.last_sign_in_at ? r.last_sign_in_at.toISOString() : null,
});

/** Unknown user, malformed id or another tenant's user: the same 404 (contract "Conventions"). */
export const userNotFound = () => new AppError('user/not_found');

/** The tenant's end user, or 404 user/not_found (also for another tenant's id). */
export async function findTenantUser(q: Queryable, tenantId: string, userId: string): Promise<EndUserRow> {
  const [row] = await q.query<EndUserRow>(`SELECT ${END_USER_COLUMNS} FROM users WHERE id = $1 AND tenant_id = $2`, [userId, tenantId]);
  if (!row) throw userNotFound();
  return row;
}
