import { Queryable } from '../../shared/db/db.service';

/**
 * The registered (non-guest) user of a tenant with this normalized address, if any, read in the
 * caller's transaction with its row locked (FOR KEY SHARE) until that transaction ends: an erasure
 * of the user (DELETE .../users/{id}) committing meanwhile either waits for the caller or has
 * removed the row already (undefined: the caller takes the unknown-address path, writing nothing
 * that names the user, where its insert would have failed on the foreign key).
 */
export async function findAccountUser(
  tx: Queryable,
  tenantId: string,
  emailNormalized: string,
  opts: { unverifiedOnly?: boolean } = {},
): Promise<{ id: string; email: string } | undefined> {
  const [user] = opts.unverifiedOnly
    ? await tx.query<{ id: string; email: string }>(
        `SELECT id, email FROM users WHERE tenant_id = $1 AND email_normalized = $2 AND NOT is_anonymous AND NOT email_verified FOR KEY SHARE`,
        [tenantId, emailNormalized],
        'account_security_unverified_lookup',
      )
    : await tx.query<{ id: string; email: string }>(
        `SELECT id, email FROM users WHERE tenant_id = $1 AND email_normalized = $2 AND NOT is_anonymous FOR KEY SHARE`,
        [tenantId, emailNormalized],
        'account_security_user_lookup',
      );
  return user;
}
