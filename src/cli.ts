import { DynamicModule, INestApplicationContext, Module, Provider, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { APP_CONFIG, AppConfig } from './config/config';
import { GuestPurgeService } from './modules/guests/purge/guest-purge.service';
import { AgentClientCache } from './modules/agents/agent-client.cache';
import { ApiKeyCache } from './shared/cache/api-key.cache';
import { ExpiredRowsSweeper } from './shared/maintenance/expired-rows.sweeper';
import { KEY_PUBLISH_LEAD_SECONDS, SigningKeysService } from './shared/crypto/signing-keys.service';
import { EnvelopeCipher } from './shared/crypto/envelope-cipher';
import { ENVELOPE_COLUMNS, KekRewrapService, RewrapCounts } from './shared/crypto/kek-rewrap.service';
import { MAIL_TOPIC } from './shared/mail/mail.service';
import { WEBHOOK_TOPIC } from './modules/webhooks/webhook-events';
import { Db } from './shared/db/db.service';
import { EventsService } from './shared/events/events.service';
import { KernelModule } from './shared/kernel.module';
import { getConfig } from './config/config.module';
import { assertRedisDatabase, closeRedisIfBootFails } from './shared/redis/redis.module';

/** A wrong invocation: the message is printed with the usage, exit code 1. */
export class CliUsageError extends Error {}
/** An expected refusal (unknown slug, ...): the message is printed, exit code 1. */
export class CliError extends Error {}

export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

/**
 * One operator command. `run` gets an application context built from KernelModule plus the
 * command's own `imports`/`providers` (a context's service the kernel does not hold), and
 * prints through `io.out`. Throw CliUsageError for bad arguments, CliError for a refusal.
 */
export interface CliCommand {
  name: string;
  /** arguments, as shown in the help: `<slug> <free|pro|enterprise>` */
  args?: string;
  description: string;
  imports?: (Type | DynamicModule)[];
  providers?: Provider[];
  /** false: runs without an application context (help) */
  needsApp?: boolean;
  /** checks the arguments before anything is connected (throw CliUsageError) */
  check?: (args: string[]) => void;
  run: (ctx: { app: INestApplicationContext; args: string[]; io: CliIo }) => Promise<void>;
}

const TIERS = ['free', 'pro', 'enterprise'] as const;

/** `tenants:set-tier <slug> <tier>`: tier is the operator's to set (billing is out of scope). */
async function setTier(app: INestApplicationContext, slug: string, tier: string): Promise<{ id: string; from: string; to: string }> {
  const events = app.get(EventsService);
  const changed = await app.get(Db).tx(async (tx) => {
    const [t] = await tx.query<{ id: string; from: string; to: string }>(
      `UPDATE tenants t SET tier = $2, updated_at = now()
         FROM (SELECT id, tier FROM tenants WHERE slug = $1 FOR UPDATE) old
        WHERE t.id = old.id
        RETURNING t.id, old.tier AS "from", t.tier AS "to"`,
      [slug, tier],
    );
    if (!t) throw new CliError(`no tenant with slug "${slug}"`);
    // the same tier again changes nothing and records nothing (it still tells the caches, below)
    if (t.from === t.to) return t;
    await events.audit(tx, {
      tenantId: t.id, type: 'tenant.tier_changed', actorType: 'system', targetType: 'tenant', targetId: t.id,
      severity: 'medium', metadata: { from: t.from, to: t.to, via: 'cli' },
    });
    return t;
  });
  const keys = await app.get(ApiKeyCache).invalidateTenant(app.get(Db), changed.id); // the keys carry the tier
  const agents = await app.get(AgentClientCache).invalidateTenant(app.get(Db), changed.id); // so do the agent clients
  // committed, but the API may serve the old tier from its caches until they expire: not a success
  if (!keys || !agents) {
    const ttl = Math.max(app.get<AppConfig>(APP_CONFIG).API_KEY_CACHE_TTL_SECONDS, app.get<AppConfig>(APP_CONFIG).AGENT_CLIENT_CACHE_TTL_SECONDS);
    throw new CliError(
      `tenant ${slug} (${changed.id}): tier ${changed.from} -> ${changed.to} is saved, but Redis could not be told, so the API may go on using ` +
        `tier ${changed.from} for up to ${ttl} s; run the command again once Redis answers`,
    );
  }
  return changed;
}

/**
 * A tenant switch that is not a spec 2.8 field, so the operator's (read-only in settings/security):
 * sets `column` and, when it changed, audits `auditType` (metadata `{ [key]: on, via: 'cli' }`), in
 * one transaction. Answers the tenant id and whether it changed.
 */
async function setTenantSwitch(
  app: INestApplicationContext,
  slug: string,
  on: boolean,
  s: { column: 'email_otp_captcha_required' | 'minor_protection_enabled'; auditType: string; key: string },
): Promise<{ id: string; changed: boolean }> {
  const events = app.get(EventsService);
  return app.get(Db).tx(async (tx) => {
    const [t] = await tx.query<{ id: string; before: boolean }>(
      `UPDATE tenants t SET ${s.column} = $2, updated_at = now()
         FROM (SELECT id, ${s.column} AS before FROM tenants WHERE slug = $1 FOR UPDATE) old
        WHERE t.id = old.id RETURNING t.id, old.before`,
      [slug, on],
    );
    if (!t) throw new CliError(`no tenant with slug "${slug}"`);
    if (t.before === on) return { id: t.id, changed: false };
    await events.audit(tx, {
      tenantId: t.id, type: s.auditType, actorType: 'system', targetType: 'tenant', targetId: t.id,
      severity: 'medium', metadata: { [s.key]: on, via: 'cli' },
    });
    return { id: t.id, changed: true };
  });
}

const rewrapCounts = (r: RewrapCounts) =>
  `${r.rewrapped} re-wrapped, ${r.current} already current, ${r.undecryptable} undecryptable${r.changed ? `, ${r.changed} changed meanwhile (left as written)` : ''}`;

/**
 * `kek:rewrap`: every envelope under the current KEY_ENCRYPTION_KEY (PostgreSQL, then the queued
 * jobs in Redis), a line per column; then the recovery codes left under an earlier key, and
 * whether KEY_ENCRYPTION_KEY_PREVIOUS can go. Prints counts, row keys and key fingerprints only,
 * never a value or a key. Fails (exit 1) when a value opens under no configured key.
 */
async function rewrapKek(app: INestApplicationContext, io: CliIo): Promise<void> {
  const cipher = app.get(EnvelopeCipher);
  const service = app.get(KekRewrapService);
  const previous = cipher.keyIds.slice(1);
  io.out(
    `key fingerprints: KEY_ENCRYPTION_KEY ${cipher.keyId}; KEY_ENCRYPTION_KEY_PREVIOUS ${previous.length ? previous.map((id, i) => `${i + 1}: ${id}`).join(', ') : 'not set'}`,
  );
  const total: RewrapCounts = { rewrapped: 0, current: 0, undecryptable: 0, changed: 0 };
  const add = (r: RewrapCounts) => {
    for (const k of Object.keys(total) as (keyof RewrapCounts)[]) total[k] += r[k];
  };
  for (const c of ENVELOPE_COLUMNS) {
    const r = await service.rewrapColumn(c);
    add(r);
    const named = r.undecryptable ? ` (rows ${r.undecryptableKeys.join(', ')}${r.undecryptable > r.undecryptableKeys.length ? ', ...' : ''})` : '';
    io.out(`${c.table}.${c.column}: ${rewrapCounts(r)}${named}`);
  }
  const jobs = await service.rewrapJobs([MAIL_TOPIC, WEBHOOK_TOPIC]);
  add(jobs);
  io.out(`queued jobs (${jobs.queues.join(', ')}): ${jobs.error ? `not checked, Redis failed (${jobs.error})` : rewrapCounts(jobs)}`);

  const codes = await service.recoveryCodes();
  const underPrevious = codes.previous.reduce((a, n) => a + n, 0);
  // made before key ids were recorded: under the key current then, possibly one of PREVIOUS
  const earlier = underPrevious + (previous.length ? codes.unrecorded : 0);
  const detail = [
    ...codes.previous.map((n, i) => (n ? `${n} under previous key ${i + 1}` : '')),
    codes.unrecorded ? `${codes.unrecorded} made before key ids were recorded${previous.length ? '' : ' (under this key, or no longer verifying)'}` : '',
    codes.unknown ? `${codes.unknown} under a key not configured (they no longer verify)` : '',
  ].filter(Boolean);
  io.out(
    `recovery codes: ${codes.current} user(s) hold unused codes under the current key, ${underPrevious + codes.unrecorded + codes.unknown} under another${detail.length ? ` (${detail.join('; ')})` : ''}; ` +
      'a code cannot be re-keyed without the code itself: one under an earlier key verifies only while that key stays in KEY_ENCRYPTION_KEY_PREVIOUS (its user can sign in with TOTP and generate new codes)',
  );

  const blockers = [
    total.undecryptable ? `${total.undecryptable} value(s) open under no configured key (encrypted under a key that is in neither variable?)` : '',
    total.changed ? `${total.changed} value(s) changed while this run read them: run kek:rewrap again` : '',
    jobs.error ? 'the queued jobs could not be checked: run kek:rewrap again once Redis answers, or wait until the mail and webhook queues have drained' : '',
    earlier ? `${earlier} user(s) hold recovery codes possibly under an earlier key: removing it makes those codes fail (wait until they have generated new ones, or accept that)` : '',
  ].filter(Boolean);
  if (!previous.length) io.out(`KEY_ENCRYPTION_KEY_PREVIOUS is not set: nothing to remove${blockers.length ? ` (but: ${blockers.join('; ')})` : ''}`);
  else if (blockers.length) io.out(`KEY_ENCRYPTION_KEY_PREVIOUS can be removed: not yet: ${blockers.join('; ')}`);
  else
    io.out(
      'KEY_ENCRYPTION_KEY_PREVIOUS can be removed: yes, no encrypted value and no recovery code is left under an earlier key ' +
        '(email codes and list cursors issued under it stop working: remove it at least 10 minutes after every instance runs with the new key)',
    );
  if (total.undecryptable) throw new CliError(`kek:rewrap: ${total.undecryptable} value(s) could not be opened with any configured key (see above); everything else was re-wrapped`);
  if (jobs.error) throw new CliError('kek:rewrap: the queued jobs in Redis were not checked (see above); PostgreSQL was re-wrapped');
}

const onOff = (name: string) => (args: string[]) => {
  if (args.length !== 2) throw new CliUsageError(`${name} needs <slug> <on|off>`);
  if (args[1] !== 'on' && args[1] !== 'off') throw new CliUsageError('the value must be on or off');
};

/** The command table; a context adds its operator commands here. */
export const COMMANDS: CliCommand[] = [
  {
    name: 'tenants:set-tier',
    args: '<slug> <free|pro|enterprise>',
    description: "sets a tenant's tier (audited)",
    providers: [AgentClientCache],
    check: (args) => {
      if (args.length !== 2) throw new CliUsageError('tenants:set-tier needs <slug> <tier>');
      if (!(TIERS as readonly string[]).includes(args[1])) throw new CliUsageError(`tier must be one of ${TIERS.join(', ')}`);
    },
    run: async ({ app, args, io }) => {
      const t = await setTier(app, args[0], args[1]);
      io.out(t.from === t.to ? `tenant ${args[0]} (${t.id}): tier ${t.to} (unchanged)` : `tenant ${args[0]} (${t.id}): tier ${t.from} -> ${t.to}`);
    },
  },
  {
    name: 'tenants:email-otp-captcha',
    args: '<slug> <on|off>',
    description: 'requires (or not) a verified captcha_token on email-OTP requests of a tenant (needs TURNSTILE_SECRET)',
    check: onOff('tenants:email-otp-captcha'),
    run: async ({ app, args, io }) => {
      // on without a secret would leave every email-code request of the tenant unanswerable (503)
      if (args[1] === 'on' && !app.get<AppConfig>(APP_CONFIG).TURNSTILE_SECRET) {
        throw new CliUsageError('tenants:email-otp-captcha on needs TURNSTILE_SECRET set for the API (captcha tokens are verified with it); set it first');
      }
      const t = await setTenantSwitch(app, args[0], args[1] === 'on', { column: 'email_otp_captcha_required', auditType: 'tenant.email_otp_captcha_changed', key: 'required' });
      io.out(`tenant ${args[0]} (${t.id}): email OTP captcha ${args[1]}${t.changed ? '' : ' (unchanged)'}`);
    },
  },
  {
    name: 'tenants:minor-protection',
    args: '<slug> <on|off>',
    description: "minor protection (spec: registration requires a date_of_birth, else 400 user/date_of_birth_required; passwordless sign-up refused) for a tenant's end users",
    check: onOff('tenants:minor-protection'),
    run: async ({ app, args, io }) => {
      const t = await setTenantSwitch(app, args[0], args[1] === 'on', { column: 'minor_protection_enabled', auditType: 'tenant.minor_protection_changed', key: 'enabled' });
      // the API keys' cache carries the switch (registration reads it from there)
      if (!(await app.get(ApiKeyCache).invalidateTenant(app.get(Db), t.id))) {
        throw new CliError(
          `tenant ${args[0]} (${t.id}): minor protection ${args[1]} is saved, but Redis could not be told, so the API may go on with the old setting for up to ` +
            `${app.get<AppConfig>(APP_CONFIG).API_KEY_CACHE_TTL_SECONDS} s; run the command again once Redis answers`,
        );
      }
      io.out(`tenant ${args[0]} (${t.id}): minor protection ${args[1]}${t.changed ? '' : ' (unchanged)'}`);
    },
  },
  {
    name: 'keys:rotate',
    args: '[--now | --revoke-old]',
    description:
      `creates a new signing key, published at once, signing ${KEY_PUBLISH_LEAD_SECONDS} s later (once cached JWKS have expired); the old ones stay published until their tokens expire. ` +
      '--now: it signs at once. --revoke-old (a compromised key): it signs at once and every older key is withdrawn, its tokens refused (clients refresh)',
    check: (args) => {
      if (args.length > 1 || (args.length === 1 && args[0] !== '--now' && args[0] !== '--revoke-old')) throw new CliUsageError('keys:rotate takes only --now or --revoke-old');
    },
    run: async ({ app, args, io }) => {
      const { kid, activeFrom, revoked } = await app.get(SigningKeysService).rotate({ immediate: args[0] === '--now', revokeOld: args[0] === '--revoke-old' });
      io.out(`new signing key: ${kid} (published now, in every instance's JWKS as soon as it is told, 30 s at the latest; signs from ${activeFrom.toISOString()})`);
      if (revoked.length) io.out(`withdrawn (tokens refused by every instance as soon as it is told, 30 s at the latest): ${revoked.join(', ')}`);
    },
  },
  {
    name: 'kek:rewrap',
    description:
      'after KEY_ENCRYPTION_KEY was changed (the old key in KEY_ENCRYPTION_KEY_PREVIOUS): re-wraps every encrypted value, in PostgreSQL and in queued jobs, under the current key; ' +
      'prints per table how many were re-wrapped, already current or undecryptable (exit 1 if any), the users whose recovery codes stay under an earlier key, and whether KEY_ENCRYPTION_KEY_PREVIOUS can be removed',
    providers: [KekRewrapService],
    check: (args) => {
      if (args.length) throw new CliUsageError('kek:rewrap takes no arguments');
    },
    run: ({ app, io }) => rewrapKek(app, io),
  },
  {
    name: 'guests:purge',
    description: 'runs the guest purge now (the worker also runs it daily)',
    providers: [GuestPurgeService],
    check: (args) => {
      if (args.length) throw new CliUsageError('guests:purge takes no arguments');
    },
    run: async ({ app, io }) => {
      const r = await app.get(GuestPurgeService).runOnce();
      io.out(`purged ${r.deleted} guest(s) in ${r.tenants} tenant(s)`);
      // a partial run is not a success: the operator (or the script calling this) must see it
      if (r.failedTenants.length)
        throw new CliError(`the purge failed for ${r.failedTenants.length} tenant(s) (see the log; the next run takes them again): ${r.failedTenants.join(', ')}`);
      if (r.untoldTenants.length) {
        const c = app.get<AppConfig>(APP_CONFIG);
        throw new CliError(
          `the purged guests are deleted, but Redis could not be told for ${r.untoldTenants.length} tenant(s) (${r.untoldTenants.join(', ')}): ` +
            `their access tokens may still be accepted for up to ${c.ACCESS_TOKEN_TTL_SECONDS} s and their profiles served for up to ${c.USER_CACHE_TTL_SECONDS} s`,
        );
      }
    },
  },
  {
    name: 'maintenance:sweep',
    description: 'deletes expired one-time rows now (the worker also does it hourly)',
    providers: [ExpiredRowsSweeper],
    check: (args) => {
      if (args.length) throw new CliUsageError('maintenance:sweep takes no arguments');
    },
    run: async ({ app, io }) => {
      const r = await app.get(ExpiredRowsSweeper).runOnce();
      io.out(`swept ${Object.entries(r).map(([t, n]) => `${t} ${n}`).join(', ')}`);
    },
  },
  {
    name: 'help',
    description: 'lists the commands',
    needsApp: false,
    run: async ({ io }) => io.out(usage()),
  },
];

export function usage(): string {
  const rows = COMMANDS.map((c) => [`${c.name}${c.args ? ` ${c.args}` : ''}`, c.description]);
  const width = Math.max(...rows.map((r) => r[0].length));
  return ['usage: npm run cli -- <command> [args]', '', ...rows.map(([a, d]) => `  ${a.padEnd(width)}  ${d}`)].join('\n');
}

@Module({})
class CliModule {
  static for(cmd: CliCommand): DynamicModule {
    return { module: CliModule, imports: [KernelModule, ...(cmd.imports ?? [])], providers: cmd.providers ?? [] };
  }
}

const stdio: CliIo = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** Runs one command (`argv` without node and script); resolves to the exit code. */
export async function runCli(argv: string[], io: CliIo = stdio): Promise<number> {
  const [given, ...args] = argv;
  // the usual spellings of help
  const name = given === '--help' || given === '-h' ? 'help' : given;
  const cmd = COMMANDS.find((c) => c.name === name);
  if (!cmd) {
    io.err(`${name ? `unknown command "${name}"` : 'no command given'}\n\n${usage()}`);
    return 1;
  }
  let app: INestApplicationContext | undefined;
  try {
    cmd.check?.(args);
    if (cmd.needsApp !== false) {
      // as the API and the worker: never on a database 0 fall-back (kek:rewrap opens BullMQ queues)
      await assertRedisDatabase(getConfig());
      // quiet while it boots: a failure (PostgreSQL or Redis out of reach) is the one line below,
      // not Nest's stack trace before it; the command's own errors are logged
      app = await closeRedisIfBootFails(() => NestFactory.createApplicationContext(CliModule.for(cmd), { logger: false, abortOnError: false }));
      app.useLogger(['error']);
    }
    await cmd.run({ app: app as INestApplicationContext, args, io });
    return 0;
  } catch (err) {
    if (err instanceof CliUsageError) io.err(`${err.message}\n\n${usage()}`);
    else if (err instanceof CliError) io.err(err.message);
    else io.err(`${cmd.name} failed: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  } finally {
    await app?.close().catch(() => undefined);
  }
}

if (require.main === module || process.argv[1]?.endsWith('dist/cli.js') || process.argv[1]?.endsWith('dist/cli')) {
  runCli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
}
