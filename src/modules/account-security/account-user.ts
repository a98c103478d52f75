import { Queryable } from '../../shared/db/db.service';

/** The registered (non-guest) user of a tenant with this normalized address, if any. */
export async function findAccountUser(
  db: Queryable,
  tenantId: string,
  emailNormalized: string,
  opts: { unverifiedOnly?: boolean } = {},
): Promise<{ id: string; email: string } | undefined> {
  const [user] = opts.unverifiedOnly
    ? await db.query<{ id: string; email: string }>(
        `SELECT id, email FROM users WHERE tenant_id = $1 AND email_normalized = $2 AND NOT is_anonymous AND NOT email_verified`,
        [tenantId, emailNormalized],
        'account_security_unverified_lookup',
      )
    : await db.query<{ id: string; email: string }>(
        `SELECT id, email FROM users WHERE tenant_id = $1 AND email_normalized = $2 AND NOT is_anonymous`,
        [tenantId, emailNormalized],
        'account_security_user_lookup',
      );
  return user;
}
