import { AppError } from '../errors/app-error';
import { ErrorCode } from '../errors/error-codes';
import { Queryable } from './db.service';

/**
 * A per-tenant cap on how many rows of one kind a tenant holds (API keys, webhook endpoints), in
 * the caller's transaction: creations of that kind are serialized per tenant (a transaction-scoped
 * advisory lock on `<kind>:<tenant>`, released at commit), so parallel requests cannot all pass the
 * count; past `max`, the `code` error (409). `countSql` counts the tenant's rows with `$1` as the
 * tenant id.
 */
export async function assertTenantCap(tx: Queryable, o: { kind: string; tenantId: string; countSql: string; max: number; code: ErrorCode; what: string }): Promise<void> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2::text, 0))`, [o.kind, o.tenantId]);
  const [{ n }] = await tx.query<{ n: number }>(o.countSql, [o.tenantId]);
  if (n >= o.max) throw new AppError(o.code, `A tenant may have at most ${o.max} ${o.what}`);
}
