/**
 * The INSERT of one row with parameters numbered from `from`, for composing into a CTE. With
 * `when` (an SQL boolean expression, e.g. over an earlier CTE) the row is inserted only when it
 * holds: `INSERT ... SELECT ... WHERE when`, so one statement can check its guards and write its
 * rows in one snapshot, without an explicit transaction. The parameters then carry their column
 * types (a bare parameter in a SELECT list would be resolved as text).
 */
export function insertRowSql(table: string, columns: readonly (readonly [name: string, type: string])[], from: number, when?: string): string {
  const names = columns.map(([n]) => n).join(', ');
  if (!when) return `INSERT INTO ${table} (${names}) VALUES (${columns.map((_, i) => `$${from + i}`).join(', ')})`;
  return `INSERT INTO ${table} (${names}) SELECT ${columns.map(([, type], i) => `$${from + i}::${type}`).join(', ')} WHERE ${when}`;
}

/**
 * The INSERT of several rows, one per element of the column arrays (parameters numbered from
 * `from`, one array per column; see `transpose`), for composing into a CTE. The rows are read
 * with `unnest(...) WITH ORDINALITY AS r(<columns>, ord)`, so `when` may name `r.ord`, the row's
 * 1-based position, to guard each row on its own (`(SELECT ok FROM g WHERE g.ord = r.ord)`).
 */
export function insertRowsSql(table: string, columns: readonly (readonly [name: string, type: string])[], from: number, when?: string): string {
  const names = columns.map(([n]) => n).join(', ');
  const arrays = columns.map(([, type], i) => `$${from + i}::${type}[]`).join(', ');
  return `INSERT INTO ${table} (${names}) SELECT ${names} FROM unnest(${arrays}) WITH ORDINALITY AS r(${names}, ord)${when ? ` WHERE ${when}` : ''}`;
}

/** Rows of values (one array per row) as one array per column: the parameters of insertRowsSql. */
export function transpose(rows: unknown[][], width: number): unknown[][] {
  return Array.from({ length: width }, (_, c) => rows.map((r) => r[c]));
}
