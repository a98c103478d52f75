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
