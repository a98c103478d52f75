/**
 * The INSERT of one row with parameters numbered from `from`, for composing into a CTE; `computed`:
 * columns set by an SQL expression rather than a parameter (e.g. `{ created_at: 'clock_timestamp()' }`).
 */
export function insertRowSql(table: string, columns: readonly (readonly [name: string, type: string])[], from: number, computed: Record<string, string> = {}): string {
  const names = [...columns.map(([n]) => n), ...Object.keys(computed)].join(', ');
  const values = [...columns.map((_, i) => `$${from + i}`), ...Object.values(computed)].join(', ');
  return `INSERT INTO ${table} (${names}) VALUES (${values})`;
}

/**
 * The INSERT of several rows, one per element of the column arrays (parameters numbered from
 * `from`, one array per column, typed; see `transpose`), for composing into a CTE. The rows are
 * read with `unnest(...) WITH ORDINALITY AS r(<columns>, ord)`, so `when` (an SQL boolean
 * expression) may name `r.ord`, the row's 1-based position, to guard each row on its own
 * (`(SELECT ok FROM g WHERE g.ord = r.ord)`): one statement checks its guards and writes its
 * rows in one snapshot, without an explicit transaction.
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
