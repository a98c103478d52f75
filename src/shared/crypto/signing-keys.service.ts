import { createPrivateKey, createPublicKey, generateKeyPairSync, KeyObject, randomUUID } from 'crypto';
import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { EventsService } from '../events/events.service';
import { Db, Queryable } from '../db/db.service';
import { REDIS } from '../redis/redis.module';
import { EnvelopeCipher } from './envelope-cipher';

interface LoadedKey {
  kid: string;
  privateKey?: KeyObject;
  publicKey: KeyObject;
  jwk: Record<string, unknown>;
  createdAt: Date;
}

/** Tokens outlive a rotation by at most this: the largest token lifetime we issue. */
const MAX_TOKEN_LIFETIME_SECONDS = 24 * 3600;
const RELOAD_MS = 30_000;
/** a scheduled switch reloads this long after its instant, so the database's now() has passed it */
const SWITCH_MARGIN_MS = 20;
/** How long relying parties may cache the JWKS (its Cache-Control max-age). */
export const JWKS_MAX_AGE_SECONDS = 300;
/**
 * A rotated-in key is published this long before it signs: every JWKS cached without it has
 * expired by then, and every API process has reloaded (RELOAD_MS), so no token carries a kid a
 * relying party cannot find in the JWKS it holds.
 */
export const KEY_PUBLISH_LEAD_SECONDS = JWKS_MAX_AGE_SECONDS + RELOAD_MS / 1000 + 30;

/**
 * RS256 signing keys: created on first start, private halves envelope-encrypted with
 * KEY_ENCRYPTION_KEY, held in memory as KeyObjects (PEM strings make signing 3x slower).
 * A rotated-out key stays published until every token it signed has expired.
 */
@Injectable()
export class SigningKeysService implements OnModuleInit, OnModuleDestroy {
  private readonly log = new Logger(SigningKeysService.name);
  private keys = new Map<string, LoadedKey>();
  private current?: LoadedKey;
  private jwksCache: { keys: Record<string, unknown>[] } = { keys: [] };
  private timer?: NodeJS.Timeout;
  /** a reload at the next scheduled switch (a key's active_from or retired_at ahead) */
  private switchTimer?: NodeJS.Timeout;
  private lastMissReload = 0;
  /** the reload an unknown kid started, while it runs */
  private missReload?: Promise<void>;
  /** a connection of its own in subscriber mode, told of every rotation (see `rotate`) */
  private subscriber?: Redis;
  /** loads started, and the number of the last one applied (see `reload`) */
  private loadsStarted = 0;
  private loadApplied = 0;

  constructor(
    private readonly db: Db,
    private readonly cipher: EnvelopeCipher,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
    private readonly events: EventsService,
  ) {}

  /** The channel rotations are announced on (channels take no key prefix: it is added here). */
  private get channel(): string {
    return `${this.config.REDIS_KEY_PREFIX}signing-keys`;
  }

  async onModuleInit(): Promise<void> {
    try {
      await this.ensureSigningKey();
    } catch (e) {
      // PostgreSQL's "relation does not exist" (42P01): the schema is not there yet
      if ((e as { code?: string }).code === '42P01') throw new Error(`the database has no schema yet (${(e as Error).message}): apply the migrations first (npm run migration:run, or node dist/migrate)`);
      throw e;
    }
    await this.reload();
    this.timer = setInterval(() => this.reloadQuietly(), RELOAD_MS);
    this.timer.unref();
    // a rotation in any process (the CLI, another API process) is announced: every process
    // reloads at once instead of at its next periodic reload, so a revoked key stops signing and
    // being trusted everywhere within moments. The periodic reload stays for announcements missed
    // while Redis was away, and each (re)subscription reloads too, to catch up on them.
    // Subscribed on every (re)connection: ioredis resubscribes by itself only to channels whose
    // subscription was confirmed, so a process started while Redis was away would never be told.
    const subscriber = (this.subscriber = this.redis.duplicate());
    const subscribe = () =>
      subscriber.subscribe(this.channel).then(
        () => true,
        (e: Error) => (this.log.warn(`not subscribed to key rotations yet (${e.message}); keys reload every ${RELOAD_MS / 1000} s until it is`), false),
      );
    subscriber.on('error', () => undefined); // the main client already reports Redis outages
    subscriber.on('message', () => this.reloadQuietly());
    subscriber.on('ready', () => {
      void subscribe();
      this.reloadQuietly();
    });
    await subscribe();
  }

  onModuleDestroy(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.switchTimer) clearTimeout(this.switchTimer);
    this.timer = undefined;
    this.switchTimer = undefined;
    this.subscriber?.disconnect();
  }

  private reloadQuietly(): void {
    this.reload().catch((e) => this.log.warn(`key reload failed: ${e}`));
  }

  /** Creates the first key when none is active (advisory lock: several processes may start at once). */
  async ensureSigningKey(): Promise<void> {
    await this.db.tx(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('authp:signing_keys'))`);
      const rows = await tx.query(`SELECT kid FROM signing_keys WHERE retired_at IS NULL LIMIT 1`);
      if (!rows.length) await this.insertKey(tx);
    });
  }

  /**
   * `cli keys:rotate`: a new key, published in the JWKS at once and signing from `activeFrom`
   * (KEY_PUBLISH_LEAD_SECONDS later; `immediate` for an emergency: at once). The key it replaces
   * signs until then and stays published until its tokens have expired. `revokeOld` (a compromised
   * key; implies `immediate`): every older key leaves the JWKS at once and the tokens it signed
   * are refused (their holders refresh: refresh tokens are not signed). Every process is told at
   * once (a Redis announcement) and reloads; one that misses it follows within one reload (30 s).
   */
  async rotate(opts: { immediate?: boolean; revokeOld?: boolean } = {}): Promise<{ kid: string; activeFrom: Date; revoked: string[] }> {
    const immediate = opts.immediate || opts.revokeOld;
    const rotated = await this.db.tx(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('authp:signing_keys'))`);
      const [{ at }] = await tx.query<{ at: Date }>(`SELECT now() + make_interval(secs => $1) AS at`, [immediate ? 0 : KEY_PUBLISH_LEAD_SECONDS]);
      // revoked: retired as long ago as a token can live, so no reload publishes or trusts it again
      const revoked = opts.revokeOld
        ? await tx.query<{ kid: string }>(
            `UPDATE signing_keys SET retired_at = now() - make_interval(secs => $1 + 1)
              WHERE retired_at IS NULL OR retired_at > now() - make_interval(secs => $1) RETURNING kid`,
            [this.publishedForSeconds()],
          )
        : (await tx.query(`UPDATE signing_keys SET retired_at = $1 WHERE retired_at IS NULL`, [at]), []);
      const kid = await this.insertKey(tx, at);
      // the operator's most security-relevant act, in the audit store with the keys it changed
      // (no tenant: keys are the platform's); a withdrawal (a compromised key) at high severity
      await this.events.audit(tx, {
        tenantId: null,
        type: opts.revokeOld ? 'signing_key.revoked' : 'signing_key.rotated',
        severity: opts.revokeOld ? 'high' : 'medium',
        actorType: 'system',
        targetType: 'signing_key',
        targetId: kid,
        metadata: { active_from: at.toISOString(), immediate: Boolean(immediate), revoked_kids: revoked.map((r) => r.kid) },
      });
      return { kid, activeFrom: at, revoked: revoked.map((r) => r.kid) };
    });
    try {
      await this.reload();
    } finally {
      // every other process reloads on this (whatever this process' own reload did); one that
      // misses it follows within RELOAD_MS
      await this.redis.publish(this.channel, rotated.kid).catch((e) => this.log.warn(`rotation not announced (${e}); other processes follow within ${RELOAD_MS / 1000} s`));
    }
    return rotated;
  }

  private async insertKey(tx: Queryable, activeFrom?: Date): Promise<string> {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const kid = randomUUID();
    const privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const publicPem = publicKey.export({ type: 'spki', format: 'pem' }) as string;
    await tx.query(`INSERT INTO signing_keys (kid, alg, public_pem, private_enc, active_from) VALUES ($1, 'RS256', $2, $3, COALESCE($4, now()))`, [
      kid,
      publicPem,
      this.cipher.encrypt(privatePem, `signing-key:${kid}`),
      activeFrom ?? null,
    ]);
    this.log.log(`created signing key ${kid}`);
    return kid;
  }

  /**
   * Loads the keys as the database has them now. Loads may overlap (none waits for another, so a
   * query that hangs holds up nothing else), and each is numbered: one that finishes after a later
   * one was applied is dropped, so an older view of the table (say, from before a revocation)
   * never replaces a newer one.
   */
  async reload(): Promise<void> {
    const seq = ++this.loadsStarted;
    const loaded = await this.load();
    if (seq < this.loadApplied) return;
    this.loadApplied = seq;
    this.keys = loaded.keys;
    this.current = loaded.current;
    this.jwksCache = { keys: [...loaded.keys.values()].map((k) => k.jwk) };
    // a delayed rotation signs from the instant it announced (keys:rotate prints it), not at the
    // first periodic reload after it: up to RELOAD_MS later
    if (this.switchTimer) clearTimeout(this.switchTimer);
    this.switchTimer = undefined;
    if (loaded.nextSwitchInMs !== null && this.timer) {
      this.switchTimer = setTimeout(() => this.reloadQuietly(), Math.min(loaded.nextSwitchInMs + SWITCH_MARGIN_MS, RELOAD_MS));
      this.switchTimer.unref();
    }
  }

  private async load(): Promise<{ keys: Map<string, LoadedKey>; current: LoadedKey; nextSwitchInMs: number | null }> {
    // `signing`: the key of this moment (active, not yet replaced); the database's clock decides,
    // so every API process switches at the same time (`switch_in_ms`: how long until a key of the
    // table starts or stops signing, by that clock)
    const rows = await this.db.query<{ kid: string; public_pem: string; private_enc: string; created_at: Date; signing: boolean; switch_in_ms: number | null }>(
      `SELECT kid, public_pem, private_enc, created_at, active_from <= now() AND (retired_at IS NULL OR retired_at > now()) AS signing,
              (extract(epoch FROM LEAST(CASE WHEN active_from > now() THEN active_from END, CASE WHEN retired_at > now() THEN retired_at END) - now()) * 1000)::float8 AS switch_in_ms
         FROM signing_keys
        WHERE retired_at IS NULL OR retired_at > now() - make_interval(secs => $1)
        ORDER BY active_from DESC, created_at DESC`,
      [this.publishedForSeconds()],
    );
    const next = new Map<string, LoadedKey>();
    let current: LoadedKey | undefined;
    for (const r of rows) {
      const existing = this.keys.get(r.kid);
      const publicKey = existing?.publicKey ?? createPublicKey(r.public_pem);
      const loaded: LoadedKey = {
        kid: r.kid,
        publicKey,
        createdAt: r.created_at,
        jwk: existing?.jwk ?? { ...publicKey.export({ format: 'jwk' }), kid: r.kid, alg: 'RS256', use: 'sig' },
      };
      if (r.signing && !current) {
        loaded.privateKey = existing?.privateKey ?? createPrivateKey(this.openPrivateKey(r.kid, r.private_enc));
        current = loaded;
      }
      next.set(r.kid, loaded);
    }
    if (!current) throw new Error('no active signing key');
    const switches = rows.map((r) => r.switch_in_ms).filter((ms): ms is number => ms !== null && ms >= 0);
    return { keys: next, current, nextSwitchInMs: switches.length ? Math.min(...switches) : null };
  }

  /** The signing key's private PEM; a key that does not open says why (the usual cause, named). */
  private openPrivateKey(kid: string, envelope: string): string {
    try {
      return this.cipher.decryptString(envelope, `signing-key:${kid}`);
    } catch (e) {
      throw new Error(
        `signing key ${kid} cannot be decrypted (${(e as Error).message}): KEY_ENCRYPTION_KEY is not the key it was encrypted with, nor is any key of KEY_ENCRYPTION_KEY_PREVIOUS; set the one this database was created with (identical on every instance), or, during a rotation, keep the earlier key in KEY_ENCRYPTION_KEY_PREVIOUS until \`npm run cli -- kek:rewrap\` has run`,
      );
    }
  }

  /** How long a retired key stays published: until every token it may have signed has expired. */
  private publishedForSeconds(): number {
    return Math.max(MAX_TOKEN_LIFETIME_SECONDS, this.config.ACCESS_TOKEN_TTL_SECONDS);
  }

  signingKey(): { kid: string; key: KeyObject } {
    if (!this.current?.privateKey) throw new Error('signing keys not loaded');
    return { kid: this.current.kid, key: this.current.privateKey };
  }

  /**
   * The public key of `kid`; an unknown kid triggers at most one reload per second (rotation).
   * Requests that meet an unknown kid while that reload runs wait for it (after a rotation this
   * instance missed, every client brings the new kid at once), then look again.
   */
  async verificationKey(kid: string): Promise<KeyObject | undefined> {
    const k = this.keys.get(kid);
    if (k) return k.publicKey;
    if (!this.missReload) {
      const now = Date.now();
      if (now - this.lastMissReload <= 1000) return undefined;
      this.lastMissReload = now;
      this.missReload = this.reload().finally(() => (this.missReload = undefined));
    }
    await this.missReload;
    return this.keys.get(kid)?.publicKey;
  }

  /** Whether `kid` is a key this process trusts now (withdrawn keys are not). */
  trusts(kid: string): boolean {
    return this.keys.has(kid);
  }

  jwks(): { keys: Record<string, unknown>[] } {
    return this.jwksCache;
  }
}
