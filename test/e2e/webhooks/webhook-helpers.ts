import { createHmac, randomBytes, timingSafeEqual } from 'crypto';
import { createServer, IncomingHttpHeaders, Server, ServerResponse } from 'http';
import type { AddressInfo, Socket } from 'net';
import { Client } from 'pg';
import { sha256Hex } from '../../../src/shared/crypto/tokens';
import { Db } from '../../../src/shared/db/db.service';
import { DashboardFixture, sessionCookie } from '../../factories/dashboard.factory';
import { randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

/** One request the receiver got. */
export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/**
 * What the receiver answers: a status, a status after a delay, a status once `when` resolves (a
 * reply the test releases, see replyGate; cut like a held one if `when` rejects), or nothing at
 * all (held open).
 */
export type Reply = number | 'hang' | { status: number; delayMs: number } | { status: number; when: Promise<unknown> };

/** A gate for a `{ status, when }` reply: the reply waits until the test calls `open()`. */
export function replyGate(): { when: Promise<void>; open: () => void } {
  let open!: () => void;
  const when = new Promise<void>((resolve) => (open = resolve));
  return { when, open };
}

/**
 * A real HTTP server on 127.0.0.1 standing in for a tenant's webhook endpoint. Each path answers
 * through its own rule, called with the 1-based number of the request on that path.
 */
export class Receiver {
  readonly received: Received[] = [];
  private rules = new Map<string, (n: number, r: Received) => Reply>();
  private counts = new Map<string, number>();
  private waiters = new Set<() => void>();
  private sockets = new Set<Socket>();
  private held = new Set<ServerResponse>();
  private server!: Server;
  port = 0;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = (req.url ?? '/').split('?')[0];
        const r: Received = { path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
        const n = (this.counts.get(path) ?? 0) + 1;
        this.counts.set(path, n);
        this.received.push(r);
        const reply = (this.rules.get(path) ?? (() => 200))(n, r);
        for (const w of this.waiters) w();
        if (reply === 'hang') {
          this.held.add(res);
          return;
        }
        const answer = (status: number) => {
          if (!res.destroyed) res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'nope');
        };
        if (typeof reply === 'object' && 'when' in reply) {
          reply.when.then(
            () => answer(reply.status),
            () => res.socket?.destroy(),
          );
          return;
        }
        const [status, delay] = typeof reply === 'number' ? [reply, 0] : [reply.status, reply.delayMs];
        setTimeout(() => answer(status), delay);
      });
    });
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** A fresh path with a rule (default: always 200). */
  path(rule: (n: number, r: Received) => Reply = () => 200): string {
    const p = `/hook/${randomBytes(6).toString('hex')}`;
    this.rules.set(p, rule);
    return p;
  }

  setRule(path: string, rule: (n: number, r: Received) => Reply): void {
    this.rules.set(path, rule);
  }

  on(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  /** Resolves once `count` requests matched (there may be more). */
  async waitFor(pred: (r: Received) => boolean, count = 1, timeoutMs = 20_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hits = this.received.filter(pred);
      if (hits.length >= count) return hits;
      if (Date.now() > deadline) throw new Error(`receiver: ${hits.length}/${count} matching requests after ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const w = () => {
          this.waiters.delete(w);
          clearTimeout(t);
          resolve();
        };
        const t = setTimeout(w, 100);
        this.waiters.add(w);
      });
    }
  }

  /** Ends every held response by cutting its connection. */
  dropHeld(): void {
    for (const res of this.held) res.socket?.destroy();
    this.held.clear();
  }

  async close(): Promise<void> {
    this.dropHeld();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Verifies a Standard Webhooks request, computed here independently of the service's code:
 * HMAC-SHA256 keyed with base64-decode(secret after `whsec_`) over `${id}.${timestamp}.${body}`,
 * compared with each `v1,<base64>` entry of webhook-signature.
 */
export function verifyStandardWebhook(secret: string, headers: IncomingHttpHeaders, body: string): boolean {
  const id = String(headers['webhook-id'] ?? '');
  const ts = String(headers['webhook-timestamp'] ?? '');
  const sigs = String(headers['webhook-signature'] ?? '').split(' ');
  if (!id || !/^\d+$/.test(ts) || !secret.startsWith('whsec_')) return false;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest();
  return sigs.some((s) => {
    const [v, b64] = s.split(',');
    const got = Buffer.from(b64 ?? '', 'base64');
    return v === 'v1' && got.length === expected.length && timingSafeEqual(got, expected);
  });
}

/** Invites a dashboard user into the tenant with `role` and signs them in (cookie + csrf). */
export async function addDashboardMember(t: TestApp, owner: DashboardFixture, role: 'owner' | 'member'): Promise<{ email: string; cookie: string; csrf: string }> {
  const email = uniqueEmail(role);
  const inv = await t
    .http()
    .post(`/v1/auth/dashboard/tenants/${owner.slug}/members`)
    .set('Cookie', owner.cookie)
    .set('X-CSRF-Token', owner.csrf)
    .send({ email, role })
    .expect(201);
  const acc = await t
    .http()
    .post('/v1/auth/dashboard/invites/accept')
    .set('X-Forwarded-For', randomIp())
    .send({ token: inv.body.invite_token, password: STRONG_PASSWORD })
    .expect(200);
  return { email, cookie: sessionCookie(acc.headers['set-cookie']), csrf: acc.body.csrf_token };
}

/** An agent client of the tenant, straight into its table (the agents API is tested elsewhere). */
export async function insertAgentClient(db: Db, tenantId: string): Promise<string> {
  const [a] = await db.query<{ id: string }>(
    `INSERT INTO agent_clients (tenant_id, name, secret_hash, grant_types, scopes)
     VALUES ($1, $2, $3, ARRAY['urn:ietf:params:oauth:grant-type:token-exchange'], ARRAY['openid'])
     RETURNING id`,
    [tenantId, `agent-${randomBytes(3).toString('hex')}`, sha256Hex(randomBytes(16))],
  );
  return a.id;
}

/**
 * A database of its own for a test file that runs the worker: the outbox relay takes every
 * pending row of its database, so a worker of another test file running at the same time on the
 * shared run database would otherwise take (and deliver with its own settings) this file's events.
 */
export async function createIsolatedDatabase(tag: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = process.env.TEST_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `authp_test_${process.env.TEST_RUN_ID ?? 'x'}_${tag}_${randomBytes(3).toString('hex')}`.toLowerCase();
  const client = new Client({ connectionString: admin });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(admin);
  url.pathname = `/${name}`;
  const { runMigrations } = await import('../../../src/migrate');
  await runMigrations(url.toString());
  return {
    url: url.toString(),
    drop: async () => {
      const c = new Client({ connectionString: admin });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Ends a webhook test world on a database of its own (createIsolatedDatabase): its workers, then
 * `others` (proxies, a DNS server), the receiver and the API; puts DATABASE_URL back and drops the
 * database. Then lets ioredis' 2 s socket-close timer of each client run out, so the jest worker
 * process exits cleanly.
 */
export async function closeIsolatedWorld(w: {
  workers: Array<{ close(): Promise<unknown> } | undefined>;
  others?: Array<{ close(): Promise<unknown> } | undefined>;
  rx?: Receiver;
  t?: TestApp;
  db?: { drop: () => Promise<void> };
  savedDbUrl: string | undefined;
}): Promise<void> {
  w.rx?.dropHeld();
  for (const worker of w.workers) await worker?.close().catch(() => undefined);
  for (const other of w.others ?? []) await other?.close();
  await w.rx?.close();
  await w.t?.close();
  process.env.DATABASE_URL = w.savedDbUrl;
  await w.db?.drop();
  await sleep(2_100);
}

/** Polls `fn` until it returns a truthy value. */
export async function eventually<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 20_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}
