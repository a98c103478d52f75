import { randomBytes } from 'crypto';
import { Db } from '../../src/shared/db/db.service';

/**
 * Holds every row a statement writes to `table` (`event`) that matches `when` (a trigger condition
 * on NEW) for `seconds`, inside that statement: its transaction keeps its locks meanwhile, so a
 * request sent during the hold meets the race window every time. Resolves to the release (drops
 * the trigger), to call in a `finally`.
 */
export async function holdWrites(db: Db, table: string, event: 'INSERT' | 'UPDATE', when: string, seconds = 0.6): Promise<() => Promise<void>> {
  const fn = `hold_${table}_${randomBytes(6).toString('hex')}`;
  await db.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(${Number(seconds)}); RETURN NEW; END $$`);
  await db.query(`CREATE TRIGGER ${fn} BEFORE ${event} ON ${table} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION ${fn}()`);
  return async () => {
    await db.query(`DROP TRIGGER ${fn} ON ${table}`);
    await db.query(`DROP FUNCTION ${fn}()`);
  };
}
