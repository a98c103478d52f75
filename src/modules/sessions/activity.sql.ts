/** The current calendar month (UTC) as a date: the MAU accounting period. */
export const CURRENT_MONTH_SQL = `(date_trunc('month', now() AT TIME ZONE 'UTC'))::date`;

/**
 * CTEs that record a user's activity, for composition into one statement:
 * - `act`: last_active_at is written at most once a minute per user (guest retention);
 * - `mu` + `mc`: the first activity of a user in a calendar month adds exactly one to the
 *   tenant's monthly active users (the (tenant, month, user) row is the idempotency guard).
 * `signIn` also stamps last_sign_in_at. `userIdExpr` is an SQL expression naming the user (a parameter or a sub-select),
 * or `ANY(...)` naming several (a batch: each tenant's counter moves once, by its number of new users).
 */
export function activityCtes(userIdExpr: string, opts: { signIn?: boolean } = {}): string {
  // a sign-in always writes (last_sign_in_at); other activity at most once a minute
  const when = opts.signIn ? 'true' : `(u.last_active_at < now() - interval '1 minute' OR o.old_month IS DISTINCT FROM ${CURRENT_MONTH_SQL})`;
  return `act AS (
      UPDATE users u SET last_active_at = now(), mau_month = ${CURRENT_MONTH_SQL}${opts.signIn ? ', last_sign_in_at = now()' : ''}
        FROM (SELECT id, mau_month AS old_month FROM users WHERE id = ${userIdExpr}) o
       WHERE u.id = o.id AND ${when}
       RETURNING u.tenant_id, u.id, o.old_month
    ), mu AS (
      INSERT INTO tenant_mau_users (tenant_id, month, user_id)
      SELECT tenant_id, ${CURRENT_MONTH_SQL}, id FROM act WHERE old_month IS DISTINCT FROM ${CURRENT_MONTH_SQL}
      ON CONFLICT DO NOTHING RETURNING tenant_id, month
    ), mc AS (
      INSERT INTO tenant_mau (tenant_id, month, active_users) SELECT tenant_id, month, count(*) FROM mu GROUP BY tenant_id, month
      ON CONFLICT (tenant_id, month) DO UPDATE SET active_users = tenant_mau.active_users + EXCLUDED.active_users
      RETURNING 1
    )`;
}
