import 'reflect-metadata';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Resolver } from 'dns';
import * as dotenv from 'dotenv';
import { BlockList, isIP } from 'net';
import { compile as compileProxyAddresses } from '@fastify/proxy-addr';
import { plainToInstance, Transform } from 'class-transformer';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  IsUrl,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  validateSync,
} from 'class-validator';

// a value of only spaces is unset, as an empty one is (Number(' ') is 0: a timeout or limit turned off)
const blank = (value: unknown): boolean => value === undefined || String(value).trim() === '';
const toInt = ({ value }: { value: unknown }) => (blank(value) ? undefined : Number(value));
// a boolean's spellings; anything else is left as it is, so IsBoolean stops the start naming the
// variable (a typo such as `ture` turned /metrics off without a word)
const toBool = ({ value }: { value: unknown }) => {
  if (blank(value)) return undefined;
  const v = String(value).trim().toLowerCase();
  return ['1', 'true', 'yes', 'on'].includes(v) ? true : ['0', 'false', 'no', 'off'].includes(v) ? false : value;
};
const trim = ({ value }: { value: unknown }) => (typeof value === 'string' ? value.trim() : value);
/** The largest delay a node timer takes (2^31 - 1 ms, about 24.8 days); a larger one fires after 1 ms, in a busy loop. */
const MAX_TIMER_MS = 2_147_483_647;
/** Ten years: no lifetime or window is longer (PostgreSQL intervals overflow far beyond). */
const MAX_SECONDS = 10 * 366 * 86400;
/** An absolute http(s) URL with a scheme (a scheme-less one made relative links and an `iss` without one). */
const HTTP_URL = { require_tld: false, require_protocol: true, protocols: ['http', 'https'] };

/** The development default of KEY_ENCRYPTION_KEY; refused in production. */
export const DEV_KEY_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64');
/** The development key's bytes: every spelling of it is compared by these. */
const DEV_KEK = Buffer.from(DEV_KEY_ENCRYPTION_KEY, 'base64');

/** Environment schema: every variable the service reads, validated once at boot. */
export class EnvSchema {
  @IsIn(['development', 'test', 'production']) NODE_ENV: 'development' | 'test' | 'production' = 'development';
  @Transform(toInt) @IsInt() @Min(0) @Max(65535) PORT = 3001;
  @IsUrl(HTTP_URL) PUBLIC_BASE_URL = 'http://localhost:3001';
  @IsUrl(HTTP_URL) ACCOUNTS_URL = 'http://localhost:3001';
  @IsOptional() @IsString() TOKEN_AUDIENCE?: string;
  @IsString() DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/authp';
  @Transform(toInt) @IsInt() @Min(1) @Max(200) DATABASE_POOL_SIZE = 20;
  /** a connection attempt, or a wait for a pooled client, fails after this (PostgreSQL out of reach: 503, not a request held for ever) */
  @Transform(toInt) @IsInt() @Min(100) @Max(600000) DATABASE_CONNECT_TIMEOUT_MS = 10000;
  /**
   * a statement (lock waits included) PostgreSQL cancels after this, and a transaction left idle
   * this long it ends; a query without any answer (a black-holed connection) fails 5 s later on
   * our side. 503 in every case, never a request or a pooled connection held for ever. 0: none
   * sent (behind a PgBouncer that refuses them: the database role's own settings apply)
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(3600000) DATABASE_STATEMENT_TIMEOUT_MS = 30000;
  @IsString() REDIS_URL = 'redis://127.0.0.1:6379';
  @IsString() REDIS_KEY_PREFIX = 'authp:';
  @Transform(toInt) @IsInt() @Min(100) @Max(60000) REDIS_COMMAND_TIMEOUT_MS = 2000;
  /**
   * Redis Sentinel: comma-separated `host:port` (`[ipv6]:port`) of the sentinels; with it, every
   * connection asks them for the current primary of REDIS_SENTINEL_MASTER (and again after a
   * failover), and REDIS_URL gives only the data nodes' credentials, database and TLS (its host
   * and port are not used). Unset: REDIS_URL's host.
   */
  @IsOptional() @IsString() REDIS_SENTINELS?: string;
  @IsOptional() @IsString() @Matches(/^[A-Za-z0-9._-]{1,100}$/, { message: 'REDIS_SENTINEL_MASTER must be the master name the sentinels monitor (letters, digits, . _ -)' })
  REDIS_SENTINEL_MASTER?: string;
  /** the sentinels' own password (`requirepass` in sentinel.conf), when they have one */
  @IsOptional() @IsString() REDIS_SENTINEL_PASSWORD?: string;
  /**
   * Replicas that must hold a revocation or cache invalidation (an ended session, a revoked access
   * token, API key or agent, a changed setting) before it is answered (Redis WAIT after the write):
   * replication is asynchronous, so a failover to a replica that missed it would serve the cached
   * "live" state it overwrote again until that expires. Fewer in REDIS_REVOCATION_WAIT_MS: 503, to
   * be sent again. 0 (default): not waited for (a single Redis, or the risk accepted)
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(16) REDIS_REVOCATION_REPLICAS = 0;
  @Transform(toInt) @IsInt() @Min(10) @Max(59000) REDIS_REVOCATION_WAIT_MS = 500;
  @IsOptional() @IsString() SMTP_URL?: string;
  @IsString() EMAIL_FROM = 'no-reply@localhost';
  @IsString() @MinLength(40) KEY_ENCRYPTION_KEY = DEV_KEY_ENCRYPTION_KEY;
  /**
   * earlier KEY_ENCRYPTION_KEYs, comma-separated (each base64 of 32 bytes), during a rotation:
   * values wrapped or keyed under one of them are still read, nothing new is written under them
   * (`npm run cli -- kek:rewrap` moves what it can to the current key; README "Rotating
   * KEY_ENCRYPTION_KEY"). Unset: none
   */
  @IsOptional() @IsString() KEY_ENCRYPTION_KEY_PREVIOUS?: string;
  // a hop count is refused: it cannot tell a proxy from a client that sends X-Forwarded-For itself
  @Transform(trim)
  @IsString()
  @Matches(/^(?!\s*\d+\s*$)/, { message: 'TRUST_PROXY must name the proxies (loopback, addresses or CIDRs, true or false), not a hop count: a hop count cannot tell a proxy from a client that sends X-Forwarded-For itself' })
  TRUST_PROXY = 'loopback';
  @IsString() CORS_ORIGINS = '';
  @Transform(toInt) @IsInt() @Min(1024) BODY_LIMIT_BYTES = 102400;
  /** the whole request (headers and body) must arrive within this, else 408 (a slow-body client cannot hold a connection) */
  @Transform(toInt) @IsInt() @Min(1000) @Max(600000) HTTP_REQUEST_TIMEOUT_MS = 30000;
  @IsIn(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) LOG_LEVEL = 'info';
  @Transform(toInt) @IsInt() @Min(1) @Max(64) API_WORKERS = 1;
  /** benchmark aid (src/shared/http/cpu-profile.ts): SIGUSR2 toggles a V8 CPU profile written here; unset: off */
  @IsOptional() @IsString() CPU_PROFILE_DIR?: string;
  /** unset = `${PUBLIC_BASE_URL}/docs#rate-limits` (this service's own documentation) */
  @IsOptional() @IsUrl(HTTP_URL) RATE_LIMIT_DOCS_URL?: string;

  @Transform(toInt) @IsInt() @Min(60) @Max(86400) ACCESS_TOKEN_TTL_SECONDS = 900;
  @Transform(toInt) @IsInt() @Min(300) @Max(MAX_SECONDS) REFRESH_TOKEN_TTL_SECONDS = 30 * 86400;
  /**
   * an end user's session refreshes at most this long after they last signed in with a credential
   * (the token's `auth_time`; claiming a guest counts, a step-up does not: as Keycloak's SSO Session
   * Max, proving presence for one action does not extend the session); then they sign in again. 0: no limit.
   * Guests are exempt (they cannot sign in again).
   */
  @Transform(toInt) @IsInt() @Min(0) @Max(10 * 366 * 86400) SESSION_MAX_AGE_SECONDS = 0;
  @Transform(toInt) @IsInt() @Min(0) @Max(300) REFRESH_REUSE_GRACE_SECONDS = 10;
  /** how long GET /v1/auth/me may answer from the Redis profile cache (0 = always PostgreSQL) */
  @Transform(toInt) @IsInt() @Min(0) @Max(3600) USER_CACHE_TTL_SECONDS = 120;
  /** how long an API key's principal (key + tenant settings) may come from the Redis cache (0 = always PostgreSQL) */
  @Transform(toInt) @IsInt() @Min(0) @Max(3600) API_KEY_CACHE_TTL_SECONDS = 120;
  /** how long an agent client (for client authentication at /oauth/*) may come from the Redis cache (0 = always PostgreSQL) */
  @Transform(toInt) @IsInt() @Min(0) @Max(3600) AGENT_CLIENT_CACHE_TTL_SECONDS = 120;
  /** how long each API process keeps an agent's api_calls_per_min in memory (a PATCH takes effect within it; 0 = read the agent-client cache on every agent-token call) */
  @Transform(toInt) @IsInt() @Min(0) @Max(60) AGENT_LIMITS_LOCAL_TTL_SECONDS = 5;
  @Transform(toInt) @IsInt() @Min(60) @Max(MAX_SECONDS) DASHBOARD_SESSION_IDLE_SECONDS = 30 * 60;
  @Transform(toInt) @IsInt() @Min(300) @Max(MAX_SECONDS) DASHBOARD_SESSION_ABSOLUTE_SECONDS = 12 * 3600;
  @Transform(toInt) @IsInt() @Min(60) @Max(MAX_SECONDS) DASHBOARD_REAUTH_MAX_AGE_SECONDS = 5 * 60;
  @Transform(toInt) @IsInt() @Min(3600) @Max(MAX_SECONDS) INVITE_TTL_SECONDS = 7 * 86400;
  @Transform(toInt) @IsInt() @Min(60) @Max(MAX_SECONDS) IDEMPOTENCY_TTL_SECONDS = 86400;

  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_AUTH_WRITE_MAX = 120;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_AUTH_READ_MAX = 600;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_REGISTER_PER_MIN = 5;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_SIGNUP_PER_MIN = 5;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_ANONYMOUS_PER_IP_PER_MIN = 5;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_ANONYMOUS_PER_KEY_PER_HOUR = 1000;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_REFRESH_PER_IP_PER_MIN = 600;
  /**
   * password sign-ins (end users and the dashboard, each apart) per client address per minute,
   * successful ones included: the failure throttle takes a right password's attempt back, so
   * without it one address could keep argon2 busy and write a session per request without end
   */
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_LOGIN_PER_IP_PER_MIN = 60;
  /** dashboard invitation mails per invited address, all tenants together, per hour */
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_INVITES_PER_ADDRESS_PER_HOUR = 3;
  /** dashboard invitations one tenant may send per day */
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_INVITES_PER_TENANT_PER_DAY = 100;
  /** failed logins per (account, client address) pair in the window: blocks only that pair */
  @Transform(toInt) @IsInt() @Min(1) LOGIN_FAILURES_PER_ACCOUNT_IP = 5;
  /** failed logins per account from all addresses in the window */
  @Transform(toInt) @IsInt() @Min(1) LOGIN_FAILURES_PER_ACCOUNT = 50;
  /** failed logins per client address (all accounts) in the window */
  @Transform(toInt) @IsInt() @Min(1) LOGIN_FAILURES_PER_IP = 100;
  @Transform(toInt) @IsInt() @Min(10) @Max(MAX_SECONDS) LOGIN_FAILURE_WINDOW_SECONDS = 900;

  @IsOptional() @IsString() TURNSTILE_SECRET?: string;
  @IsUrl(HTTP_URL) TURNSTILE_SITEVERIFY_URL = 'https://challenges.cloudflare.com/turnstile/v0/siteverify';
  /** hostnames the sign-up challenge must have been solved on (siteverify's `hostname`), comma-separated; empty = any */
  @IsString()
  @Matches(/^\s*([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\s*(,\s*|$))*$/, {
    message: 'TURNSTILE_HOSTNAMES must be a comma-separated list of host names (no scheme, port or path)',
  })
  TURNSTILE_HOSTNAMES = '';

  // OWASP's 7 MiB / t=5 / p=1 row (see OWASP_ARGON2ID_ROWS): the same defense as 19 MiB / t=2, and
  // about 1.5x the verifies per second on this kind of host (its memory fits the CPU caches better)
  @Transform(toInt) @IsInt() @Min(1024) @Max(4_194_304) ARGON2_MEMORY_KIB = 7168;
  @Transform(toInt) @IsInt() @Min(1) @Max(100) ARGON2_TIME_COST = 5;
  // at most 128 lanes: argon2 needs 8 KiB of memory per lane, and ARGON2_MEMORY_KIB is at least 1024
  @Transform(toInt) @IsInt() @Min(1) @Max(128) ARGON2_PARALLELISM = 1;
  // hashes at once per process: the core count, also with several API_WORKERS. Splitting the cores
  // between processes left a core idle whenever a burst's connections landed on one process
  // (node:cluster balances connections, not requests): at 60 sign-ins/s on 2 cores and 2
  // processes, p99 107 ms with 1 per process against 78 ms with 2 (single runs; the maximum rate,
  // about 60-65/s on that host at that time, did not change).
  @Transform(toInt) @IsInt() @Min(1) @Max(64) ARGON2_MAX_CONCURRENCY = Math.max(1, os.cpus().length);
  /**
   * hashes waiting per process beyond which a password check answers 503 with Retry-After at once
   * (load shedding: a flood from many addresses, each within its limits, would otherwise make every
   * sign-in wait seconds in an unbounded queue)
   */
  @Transform(toInt) @IsInt() @Min(1) @Max(100000) ARGON2_MAX_WAITING = 256;

  @Transform(toInt) @IsInt() @Min(1) @Max(MAX_TIMER_MS) OUTBOX_POLL_MS = 500;
  /** the worker's own /health, /ready and /metrics port (on HOST); unset: none. 0 picks a free port (tests) */
  @Transform(toInt) @IsOptional() @IsInt() @Min(0) @Max(65535) WORKER_HEALTH_PORT?: number;
  // the hourly sweep (src/shared/maintenance/expired-rows.sweeper.ts) deletes settled outbox rows
  // (their encrypted link tokens and codes with them) and finished webhook deliveries this old
  @Transform(toInt) @IsInt() @Min(1) @Max(3650) OUTBOX_RETENTION_DAYS = 7;
  @Transform(toInt) @IsInt() @Min(1) @Max(3650) WEBHOOK_DELIVERY_RETENTION_DAYS = 30;
  /** the hourly sweep deletes audit events this many days old; 0 keeps them forever */
  @Transform(toInt) @IsInt() @Min(0) @Max(36500) AUDIT_RETENTION_DAYS = 0;
  /** the hourly sweep deletes agent actions (activity timelines, "agents acting on me") this many days old; 0 keeps them forever */
  @Transform(toInt) @IsInt() @Min(0) @Max(36500) AGENT_ACTIVITY_RETENTION_DAYS = 0;
  // the worker's queue reconciler (src/shared/outbox/queue-reconciler.ts): how often it re-adds
  // the BullMQ jobs a Redis data loss may have dropped, and how old a relayed row or a pending
  // delivery must be before it is looked at (younger ones are in the normal flow)
  @Transform(toInt) @IsInt() @Min(1) @Max(86400) QUEUE_RECONCILE_SECONDS = 300;
  @Transform(toInt) @IsInt() @Min(0) @Max(86400) QUEUE_RECONCILE_GRACE_SECONDS = 600;

  // tenant webhooks (src/modules/webhooks): per-attempt timeout, retry schedule, auto-disable
  @Transform(toInt) @IsInt() @Min(100) @Max(60000) WEBHOOK_TIMEOUT_MS = 10000;
  @Transform(toInt) @IsInt() @Min(1) @Max(MAX_TIMER_MS) WEBHOOK_BACKOFF_BASE_MS = 5000;
  @Transform(toInt) @IsInt() @Min(1) @Max(30) WEBHOOK_MAX_ATTEMPTS = 15;
  @Transform(toInt) @IsInt() @Min(1) WEBHOOK_DISABLE_AFTER_FAILED_DELIVERIES = 5;
  @Transform(toInt) @IsInt() @Min(1000) @Max(MAX_TIMER_MS) WEBHOOK_LOCK_MS = 30000;
  @Transform(toInt) @IsInt() @Min(1) @Max(100) WEBHOOK_CONCURRENCY = 10;
  @Transform(toInt) @IsInt() @Min(1) @Max(100) WEBHOOK_CONCURRENCY_PER_TENANT = 3;
  // DNS servers webhook host names are resolved with (c-ares, not /etc/hosts): comma-separated
  // `ip`, `ipv4:port`, `[ipv6]` or `[ipv6]:port`; empty: the system's (resolv.conf). Each entry is
  // parsed by parseDnsServers and the list tried on a dns.Resolver at boot (loadConfig)
  @IsString() WEBHOOK_DNS_SERVERS = '';

  // TOTP MFA (src/modules/mfa): POST /v1/auth/mfa/verify per client address; MFA enrollment-only token lifetime
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_MFA_VERIFY_PER_IP_PER_MIN = 30;
  /** wrong second-factor codes per account from all client addresses in LOGIN_FAILURE_WINDOW_SECONDS (addresses that passed MFA before excepted); 429 beyond */
  @Transform(toInt) @IsInt() @Min(1) MFA_FAILURES_PER_ACCOUNT = 10;
  @Transform(toInt) @IsInt() @Min(60) @Max(3600) MFA_ENROLLMENT_TOKEN_TTL_SECONDS = 600;

  // account security (src/modules/account-security): link lifetime of email verification; limits of
  // every mail-sending endpoint (per address and flow, per client address) and of token/code checks
  @Transform(toInt) @IsInt() @Min(600) @Max(604800) EMAIL_VERIFICATION_TTL_SECONDS = 86400;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_EMAIL_PER_ADDRESS = 5;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_EMAIL_PER_IP = 30;
  @Transform(toInt) @IsInt() @Min(10) @Max(MAX_SECONDS) RATE_LIMIT_EMAIL_WINDOW_SECONDS = 900;
  @Transform(toInt) @IsInt() @Min(1) RATE_LIMIT_CODE_VERIFY_PER_IP_PER_MIN = 30;
  /** wrong email codes (sign-in: per address; step-up: per account) from all client addresses in the window, over every code; 429 beyond */
  @Transform(toInt) @IsInt() @Min(1) EMAIL_CODE_FAILURES_PER_ADDRESS = 10;
  @Transform(toInt) @IsInt() @Min(10) @Max(MAX_SECONDS) EMAIL_CODE_FAILURE_WINDOW_SECONDS = 900;
  /** enumeration-safe mail requests (forgot, resend, magic link, email code) answer 202 no sooner than this, known address or not (0: off) */
  @Transform(toInt) @IsInt() @Min(0) @Max(5000) ENUMERATION_SAFE_MIN_RESPONSE_MS = 150;

  @Transform(toBool) @IsBoolean() @IsOptional() METRICS_ENABLED = true;
  /** when set, GET /metrics answers only `Authorization: Bearer <METRICS_TOKEN>` (Prometheus `authorization` / `bearer_token`) */
  // trimmed: a token read from a mounted secret file often ends in a newline, which Prometheus does not send
  @Transform(trim) @IsOptional() @IsString() @MinLength(32) @MaxLength(512) METRICS_TOKEN?: string;
}

export type AppConfig = Readonly<
  Omit<EnvSchema, 'TOKEN_AUDIENCE' | 'RATE_LIMIT_DOCS_URL'> & {
    TOKEN_AUDIENCE: string;
    RATE_LIMIT_DOCS_URL: string;
    isProduction: boolean;
    isTest: boolean;
    keyEncryptionKey: Buffer;
    /** KEY_ENCRYPTION_KEY_PREVIOUS decoded, in the order given; empty when unset */
    previousKeyEncryptionKeys: Buffer[];
    corsOrigins: string[];
    turnstileHostnames: string[];
    /** WEBHOOK_DNS_SERVERS parsed and checked (parseDnsServers); empty: the system's servers */
    webhookDnsServers: string[];
  }
>;

export const APP_CONFIG = Symbol('APP_CONFIG');

function loadDotEnv(): void {
  if (process.env.NODE_ENV === 'test') return;
  const file = process.env.DOTENV_PATH ?? path.resolve(process.cwd(), '.env');
  if (fs.existsSync(file)) dotenv.config({ path: file });
}

/**
 * The argon2id configurations of the OWASP Password Storage Cheat Sheet (memory KiB, iterations,
 * parallelism 1), which it calls an equal level of defense trading memory for CPU. Outside
 * NODE_ENV=test the configured cost must reach at least one of them.
 */
export const OWASP_ARGON2ID_ROWS: readonly (readonly [memoryKib: number, timeCost: number])[] = [
  [47104, 1],
  [19456, 2],
  [12288, 3],
  [9216, 4],
  [7168, 5],
];

export function meetsOwaspArgon2id(memoryKib: number, timeCost: number): boolean {
  return OWASP_ARGON2ID_ROWS.some(([m, t]) => memoryKib >= m && timeCost >= t);
}

const DNS_SERVERS_FORM = 'WEBHOOK_DNS_SERVERS must be a comma-separated list of ip, ipv4:port, [ipv6] or [ipv6]:port (port 1-65535)';

/**
 * WEBHOOK_DNS_SERVERS as dns.Resolver.setServers takes it, or the problems found. Every entry is
 * parsed here (an address net.isIP accepts, a port 1-65535) and the whole list then tried on a
 * throwaway Resolver, so that a bad value stops the start instead of every webhook lookup: Node
 * aborts the process on port 0 (`1.1.1.1:0`, a failed assertion in C++, not an exception) and
 * throws ERR_INVALID_IP_ADDRESS on every setServers call for `999.1.1.1`, `:` and the like.
 * IPv6 with a port must be bracketed (`::1:53` is an address).
 */
export function parseDnsServers(raw: string): { servers: string[]; problems: string[] } {
  const servers: string[] = [];
  const problems: string[] = [];
  const portOk = (p: string | undefined) => p === undefined || (/^\d{1,5}$/.test(p) && Number(p) >= 1 && Number(p) <= 65535);
  for (const entry of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const bracketed = /^\[([^\]]*)\](?::([^:]*))?$/.exec(entry);
    const v4port = /^([0-9.]+):([^:]*)$/.exec(entry);
    const ok = bracketed
      ? isIP(bracketed[1]) === 6 && portOk(bracketed[2])
      : v4port
        ? isIP(v4port[1]) === 4 && portOk(v4port[2])
        : isIP(entry) !== 0;
    if (ok) servers.push(entry);
    else problems.push(`WEBHOOK_DNS_SERVERS: "${entry}" is not valid: ${DNS_SERVERS_FORM}`);
  }
  if (!problems.length && servers.length) {
    try {
      new Resolver().setServers(servers);
    } catch (e) {
      problems.push(`WEBHOOK_DNS_SERVERS: refused by the DNS resolver (${(e as Error).message}): ${DNS_SERVERS_FORM}`);
    }
  }
  return { servers, problems };
}

/**
 * A key-encryption key as configured: standard or URL-safe base64, padded or not, surrounding
 * spaces ignored (a mounted secret ends in a newline), of exactly 32 bytes. Checked against the
 * alphabet first: Buffer.from alone skips characters outside it, so a typo would decode to
 * another key, and many spellings would decode to one (the development key among them).
 */
export function decodeKek(raw: string): { key: Buffer } | { problem: string } {
  const value = raw.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) return { problem: 'is not base64 (the value is not shown)' };
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) return { problem: `must be base64 of exactly 32 bytes (it decodes to ${key.length})` };
  return { key };
}

/**
 * KEY_ENCRYPTION_KEY_PREVIOUS decoded, or the problems found: each comma-separated entry must be
 * base64 of exactly 32 bytes, differ from KEY_ENCRYPTION_KEY (`current`) and from the entries
 * before it, and in production not be the development key. A problem names the entry by its
 * position (1 = first), never by its value. Empty entries (a trailing comma) are skipped.
 */
export function parsePreviousKeys(raw: string, current: Buffer, production: boolean): { keys: Buffer[]; problems: string[] } {
  const keys: Buffer[] = [];
  const problems: string[] = [];
  const entries = raw.split(',');
  for (let i = 0; i < entries.length; i++) {
    const value = entries[i].trim();
    if (!value) continue;
    const problem = ((): string | undefined => {
      const decoded = decodeKek(value);
      if ('problem' in decoded) return decoded.problem;
      const { key } = decoded;
      if (key.equals(current)) return 'is KEY_ENCRYPTION_KEY itself: the current key goes only in KEY_ENCRYPTION_KEY';
      if (keys.some((k) => k.equals(key))) return 'repeats an earlier entry of KEY_ENCRYPTION_KEY_PREVIOUS';
      if (production && key.equals(DEV_KEK)) return 'is the development key, refused in production';
      keys.push(key);
      return undefined;
    })();
    if (problem) problems.push(`KEY_ENCRYPTION_KEY_PREVIOUS: key ${i + 1} ${problem}`);
  }
  return { keys, problems };
}

/**
 * TRUST_PROXY checked at boot by the parser Fastify itself uses (proxy-addr): `true`, `false`, or a
 * comma-separated list of named ranges (loopback, linklocal, uniquelocal), addresses and CIDRs, so
 * a typo stops the start with a message naming the variable, not a bare "invalid IP address".
 */
function trustProxyProblems(value: string): string[] {
  const v = value.trim();
  if (v === '' || v === 'true' || v === 'false') return [];
  try {
    compileProxyAddresses(v.split(',').map((s) => s.trim()));
    return [];
  } catch (e) {
    return [`TRUST_PROXY: ${(e as Error).message}; expected true, false, or a comma-separated list of loopback, linklocal, uniquelocal, addresses and CIDRs (10.0.0.0/8, fd00::/8)`];
  }
}

/**
 * DATABASE_URL, REDIS_URL and SMTP_URL parsed as the clients will parse them, so a typo (a port
 * out of range, a missing scheme) stops the start here, by name, and never in a client whose
 * error would print the URL, its password included. The value is never echoed.
 */
/** REDIS_SENTINELS parsed (`host:port`, `[ipv6]:port`), or the reason it cannot be. */
export function parseSentinels(value: string): { host: string; port: number }[] | string {
  const out: { host: string; port: number }[] = [];
  for (const part of value.split(',').map((x) => x.trim()).filter(Boolean)) {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9._-]+)):(\d{1,5})$/.exec(part);
    const port = m ? Number(m[3]) : 0;
    if (!m || port < 1 || port > 65535) return `REDIS_SENTINELS: "${part}" is not host:port ([ipv6]:port for an IPv6 address)`;
    out.push({ host: m[1] ?? m[2], port });
  }
  return out.length ? out : 'REDIS_SENTINELS: names no sentinel';
}

function connectionUrlProblems(env: { DATABASE_URL?: string; REDIS_URL?: string; SMTP_URL?: string }): string[] {
  const rules: [keyof typeof env, string[]][] = [
    ['DATABASE_URL', ['postgres:', 'postgresql:']],
    ['REDIS_URL', ['redis:', 'rediss:']],
    ['SMTP_URL', ['smtp:', 'smtps:']],
  ];
  const problems: string[] = [];
  for (const [name, schemes] of rules) {
    const value = env[name];
    if (value === undefined) continue;
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
    // PostgreSQL and Redis may name no host (a Unix socket: postgres:///db?host=/run/postgresql);
    // a Redis database is a number (ioredis sent SELECT NaN for /abc)
    if (!url || !schemes.includes(url.protocol) || (name === 'SMTP_URL' && !url.hostname) || (name === 'REDIS_URL' && !/^\/?\d*$/.test(url.pathname))) problems.push(`${name}: not a valid ${schemes.map((s) => `${s}//`).join(' or ')} URL (the value is not shown: it may hold a password)`);
    // the Redis clients take host, port, credentials, database and TLS from REDIS_URL, nothing else:
    // `?db=2` or `?family=6` would be ignored without a word (database 0, the default family)
    else if (name === 'REDIS_URL' && (url.search || url.hash)) problems.push('REDIS_URL: options in a query or fragment are not read (give the database as the path: redis://host:6379/2)');
  }
  return problems;
}

/** Whether an http(s) URL names this machine: localhost (or a name under it) or a loopback address. */
function isLoopbackUrl(value: string): boolean {
  try {
    const host = new URL(value).hostname.replace(/^\[|\]$/g, '').toLowerCase();
    const family = isIP(host);
    return host === 'localhost' || host.endsWith('.localhost') || (family !== 0 && THIS_MACHINE.check(host, family === 4 ? 'ipv4' : 'ipv6'));
  } catch {
    return false;
  }
}

/** Addresses that name this machine, whatever it is: loopback, unspecified, and their IPv4-mapped IPv6 forms. */
const THIS_MACHINE = new BlockList();
THIS_MACHINE.addSubnet('127.0.0.0', 8, 'ipv4');
THIS_MACHINE.addAddress('0.0.0.0', 'ipv4');
THIS_MACHINE.addAddress('::1', 'ipv6');
THIS_MACHINE.addAddress('::', 'ipv6');
THIS_MACHINE.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');
THIS_MACHINE.addAddress('::ffff:0.0.0.0', 'ipv6');

/**
 * A warning for development mode (the default) configured like a deployment (a public
 * PUBLIC_BASE_URL): it accepts the development KEY_ENCRYPTION_KEY and, without SMTP_URL, logs mails
 * with their links. Undefined otherwise.
 */
export function developmentModeWarning(config: Pick<AppConfig, 'NODE_ENV' | 'PUBLIC_BASE_URL'>): string | undefined {
  if (config.NODE_ENV !== 'development' || isLoopbackUrl(config.PUBLIC_BASE_URL)) return undefined;
  return `NODE_ENV is development (the default) while PUBLIC_BASE_URL is ${config.PUBLIC_BASE_URL}: set NODE_ENV=production for a deployment`;
}

/**
 * PUBLIC_BASE_URL (the tokens' `iss`, RFC 8414: no query or fragment) and ACCOUNTS_URL (the base
 * links are built on: a query swallowed the path and the token) name a base, nothing after it.
 */
function baseUrlProblems(env: { PUBLIC_BASE_URL: string; ACCOUNTS_URL: string }): string[] {
  const problems: string[] = [];
  for (const name of ['PUBLIC_BASE_URL', 'ACCOUNTS_URL'] as const) {
    try {
      const url = new URL(env[name]);
      if (url.search || url.hash || env[name].includes('#') || env[name].includes('?')) problems.push(`${name}: must have no query (?) or fragment (#)`);
    } catch {
      // refused by its URL rule already
    }
  }
  return problems;
}

/** An address, or a display name with one: what nodemailer takes as `from`. */
function isMailbox(value: string): boolean {
  const m = /^(?:[^<>]*<([^<>\s]+)>|([^<>\s]+))$/.exec(value.trim());
  const address = m?.[1] ?? m?.[2];
  return !!address && /^[^@\s]+@[^@\s]+$/.test(address);
}

/** The WHATWG URL special schemes: their origin is scheme://host[:port]; other schemes' is "null". */
const SPECIAL_SCHEMES = new Set(['http:', 'https:', 'ws:', 'wss:', 'ftp:']);

/**
 * CORS_ORIGINS: origins as browsers send them (`scheme://host[:port]`, no path, no slash at the
 * end: one never matched, and CORS was off without a word); `*` is refused (credentials are sent).
 * The Origin header is compared as a string, so an app's own scheme (`capacitor://localhost`,
 * `ionic://localhost`, `tauri://localhost`, `chrome-extension://<id>`, whose URL origin node calls
 * "null") is an origin too when it has a host and nothing after it.
 */
function corsOriginProblems(value: string): string[] {
  const problems: string[] = [];
  for (const origin of value.split(',').map((o) => o.trim()).filter(Boolean)) {
    let ok = false;
    try {
      const url = new URL(origin);
      ok = SPECIAL_SCHEMES.has(url.protocol) ? url.origin === origin : /^[a-z][a-z0-9+.-]*:\/\/[^/?#\s\\@]+$/.test(origin);
    } catch {
      ok = false;
    }
    if (!ok) problems.push(`CORS_ORIGINS: "${origin}" is not an origin (https://app.example.com, no path or trailing slash${origin === '*' ? '; * is refused: dashboard requests carry credentials' : ''})`);
  }
  return problems;
}

/**
 * What `node dist/migrate` needs, and nothing else: DATABASE_URL (required in production, checked
 * as loadConfig checks it). A migration job is given the database, not the signing-key secret or
 * the SMTP credentials the service needs.
 */
export function loadMigrationConfig(env: NodeJS.ProcessEnv = process.env): { DATABASE_URL: string } {
  if (env === process.env) loadDotEnv();
  const problems: string[] = [];
  // blank is unset, as in loadConfig
  const given = env.DATABASE_URL?.trim() ? env.DATABASE_URL : undefined;
  if (!given && env.NODE_ENV?.trim() === 'production') problems.push('DATABASE_URL: must be set in production');
  const DATABASE_URL = given ?? new EnvSchema().DATABASE_URL;
  problems.push(...connectionUrlProblems({ DATABASE_URL }));
  if (problems.length) throw new Error(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  return { DATABASE_URL };
}

/** Validates the environment into a typed, frozen config; throws with every problem listed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  if (env === process.env) loadDotEnv();
  const raw: Record<string, unknown> = {};
  // empty or only spaces: unset (its default applies)
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v.trim() !== '') raw[k] = v;
  const parsed = plainToInstance(EnvSchema, raw, { exposeDefaultValues: true });
  const errors = validateSync(parsed, { whitelist: false });
  const problems = errors.map((e) => `${e.property}: ${Object.values(e.constraints ?? {}).join(', ')}`);

  const current = decodeKek(parsed.KEY_ENCRYPTION_KEY ?? '');
  if ('problem' in current) problems.push(`KEY_ENCRYPTION_KEY: ${current.problem}`);
  const kek = 'key' in current ? current.key : Buffer.alloc(0);
  const previousKeks = parsePreviousKeys(parsed.KEY_ENCRYPTION_KEY_PREVIOUS ?? '', kek, parsed.NODE_ENV === 'production');
  problems.push(...previousKeks.problems);
  if (parsed.NODE_ENV === 'production') {
    // `raw`: a value of only spaces (a mounted secret holding a newline) is unset here too
    const env = raw as Record<string, string | undefined>;
    // compared as bytes: any spelling of the development key (unpadded, URL-safe, a newline) is it
    if (!env.KEY_ENCRYPTION_KEY || kek.equals(DEV_KEK))
      problems.push('KEY_ENCRYPTION_KEY: must be set to a secret of your own in production (openssl rand -base64 32)');
    if (!env.DATABASE_URL) problems.push('DATABASE_URL: must be set in production');
    if (!env.REDIS_URL) problems.push('REDIS_URL: must be set in production');
    if (!env.PUBLIC_BASE_URL) problems.push('PUBLIC_BASE_URL: must be set in production');
    if (!env.SMTP_URL) problems.push('SMTP_URL: must be set in production (mail cannot be logged there)');
    // the development defaults send every link in a mail to localhost and mail from a domain no
    // receiving server accepts (SPF/DMARC): a production start with either left out sends mails
    // that cannot work
    if (!env.ACCOUNTS_URL) problems.push('ACCOUNTS_URL: must be set in production (the base of the links in mails: your front end)');
    if (!env.EMAIL_FROM) problems.push('EMAIL_FROM: must be set in production (an address of a domain your SMTP server may send for)');
    // set, but to the development value or another name of this machine (a copied .env.example,
    // compose's defaults): tokens would name localhost as their issuer and mails would link there
    for (const name of ['PUBLIC_BASE_URL', 'ACCOUNTS_URL'] as const)
      if (env[name] && isLoopbackUrl(parsed[name])) problems.push(`${name}: must be the public URL in production, not a loopback one (${parsed[name]})`);
    if (env.EMAIL_FROM && /@(localhost|[^@]*\.localhost)>?$/i.test(parsed.EMAIL_FROM.trim())) problems.push(`EMAIL_FROM: must be an address of your own domain in production, not ${parsed.EMAIL_FROM}`);
  }
  if (parsed.NODE_ENV !== 'test' && !meetsOwaspArgon2id(parsed.ARGON2_MEMORY_KIB, parsed.ARGON2_TIME_COST))
    problems.push(
      `ARGON2_MEMORY_KIB/ARGON2_TIME_COST: ${parsed.ARGON2_MEMORY_KIB} KiB x ${parsed.ARGON2_TIME_COST} is below every OWASP argon2id configuration (${OWASP_ARGON2ID_ROWS.map(([m, t]) => `${m} KiB x ${t}`).join(', ')})`,
    );
  problems.push(...baseUrlProblems(parsed));
  if (!isMailbox(parsed.EMAIL_FROM)) problems.push('EMAIL_FROM: must be an address (no-reply@example.com or "Name <no-reply@example.com>")');
  problems.push(...corsOriginProblems(parsed.CORS_ORIGINS));
  problems.push(...trustProxyProblems(parsed.TRUST_PROXY ?? ''));
  problems.push(...connectionUrlProblems(parsed));
  if (parsed.REDIS_SENTINELS) {
    const sentinels = parseSentinels(parsed.REDIS_SENTINELS);
    if (typeof sentinels === 'string') problems.push(sentinels);
    if (!parsed.REDIS_SENTINEL_MASTER) problems.push('REDIS_SENTINEL_MASTER: must name the master the sentinels monitor when REDIS_SENTINELS is set');
  }
  // the WAIT is a Redis command: past the command timeout it would fail whatever the replicas did
  if (parsed.REDIS_REVOCATION_REPLICAS > 0 && parsed.REDIS_REVOCATION_WAIT_MS >= parsed.REDIS_COMMAND_TIMEOUT_MS)
    problems.push(`REDIS_REVOCATION_WAIT_MS: must be below REDIS_COMMAND_TIMEOUT_MS (${parsed.REDIS_COMMAND_TIMEOUT_MS})`);
  const dnsServers = parseDnsServers(parsed.WEBHOOK_DNS_SERVERS ?? '');
  problems.push(...dnsServers.problems);
  if (problems.length) {
    throw new Error(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
  const isTest = parsed.NODE_ENV === 'test';
  const cfg = {
    ...parsed,
    // argon2id OWASP parameters (7 MiB, t=5, p=1 by default); a lower cost only under NODE_ENV=test.
    ARGON2_MEMORY_KIB: isTest && !env.ARGON2_MEMORY_KIB ? 1024 : parsed.ARGON2_MEMORY_KIB,
    ARGON2_TIME_COST: isTest && !env.ARGON2_TIME_COST ? 1 : parsed.ARGON2_TIME_COST,
    TOKEN_AUDIENCE: parsed.TOKEN_AUDIENCE ?? parsed.PUBLIC_BASE_URL,
    RATE_LIMIT_DOCS_URL: parsed.RATE_LIMIT_DOCS_URL ?? `${parsed.PUBLIC_BASE_URL.replace(/\/+$/, '')}/docs#rate-limits`,
    isProduction: parsed.NODE_ENV === 'production',
    isTest,
    keyEncryptionKey: kek,
    previousKeyEncryptionKeys: previousKeks.keys,
    corsOrigins: parsed.CORS_ORIGINS.split(',').map((s) => s.trim()).filter(Boolean),
    turnstileHostnames: parsed.TURNSTILE_HOSTNAMES.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean),
    webhookDnsServers: dnsServers.servers,
  };
  return Object.freeze(cfg) as AppConfig;
}
