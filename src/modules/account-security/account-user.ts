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

/**
 * The user found before the transaction, if it still exists, its row locked (FOR KEY SHARE) until
 * the caller's transaction ends: an erasure of the user (DELETE .../users/{id}) committing in the
 * meantime has either removed the row already (undefined: the caller takes the unknown-address
 * path, writing nothing that names the user, where its insert would have failed on the foreign
 * key) or waits for the caller. Runs its one statement for an unknown address too (comparable work).
 */
export async function lockAccountUser<T extends { id: string }>(tx: Queryable, tenantId: string, user: T | undefined): Promise<T | undefined> {
  const rows = await tx.query<{ id: string }>(
    `SELECT id FROM users WHERE id = $1 AND tenant_id = $2 FOR KEY SHARE`,
    [user?.id ?? null, tenantId],
    'account_security_user_lock',
  );
  return rows.length ? user : undefined;
}
