/* eslint-disable */
// Times the guest purge: 100,000 stale guests across 10 tenants, runs until none is left.
const path = require('path');
require('reflect-metadata');
const { NestFactory } = require('@nestjs/core');
const { Module } = require('@nestjs/common');
const dist = (p) => require(path.join(__dirname, '..', 'dist', 'src', p));
const { KernelModule } = dist('shared/kernel.module');
const { GuestPurgeService } = dist('modules/guests/purge/guest-purge.service');
const { Db } = dist('shared/db/db.service');

async function main() {
  class PurgeBenchModule {}
  Module({ imports: [KernelModule], providers: [GuestPurgeService] })(PurgeBenchModule);
  const app = await NestFactory.createApplicationContext(PurgeBenchModule, { logger: ['error'] });
  const db = app.get(Db);
  const purge = app.get(GuestPurgeService);
  const tenants = 10, perTenant = 10000;
  for (let i = 0; i < tenants; i++) {
    const [t] = await db.query(`INSERT INTO tenants (slug, name, anonymous_signins_enabled, anonymous_user_ttl_days) VALUES ($1, $1, true, 30) RETURNING id`, [`purge-bench-${Date.now()}-${i}`]);
    await db.query(
      `WITH u AS (INSERT INTO users (tenant_id, is_anonymous, last_active_at) SELECT $1, true, now() - interval '40 days' FROM generate_series(1, $2) RETURNING id),
            s AS (INSERT INTO user_sessions (tenant_id, user_id) SELECT $1, id FROM u RETURNING id, user_id)
       INSERT INTO refresh_tokens (session_id, tenant_id, user_id, secret_hash, expires_at) SELECT id, $1, user_id, 'x', now() + interval '1 day' FROM s`,
      [t.id, perTenant],
    );
  }
  // statistics for the rows just loaded, as autovacuum would gather them in production (it may be
  // off on a benchmark host, as on this one): planned from the statistics of a small table, each
  // purge run takes ten times longer
  await db.query('ANALYZE users, user_sessions, refresh_tokens');
  const t0 = Date.now();
  let runs = 0, total = 0;
  for (;;) {
    const r = await purge.runOnce();
    if (r.deleted === 0) break;
    runs++; total += r.deleted;
  }
  const seconds = (Date.now() - t0) / 1000;
  await app.close();
  console.log(JSON.stringify({ guests: total, tenants, runs, seconds: seconds.toFixed(1), perRun: (seconds / runs).toFixed(2) }));
}
main().catch((e) => { console.error(e); process.exit(1); });
