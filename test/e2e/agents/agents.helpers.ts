import Redis from 'ioredis';
import { AgentsService } from '../../../src/modules/agents/agents.service';
import { JwtService } from '../../../src/shared/crypto/jwt.service';
import { createApiKey, DashboardFixture, sessionCookie, signupTenant } from '../../factories/dashboard.factory';
import { expectedKeySubject } from '../../setup/client-hash';
import { randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const CIBA = 'urn:openid:params:grant-type:ciba';
export const DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code';
export const CLIENT_CREDENTIALS = 'client_credentials';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const agentsUrl = (d: { slug: string }, rest = '') => `/v1/auth/dashboard/tenants/${d.slug}/agents${rest}`;

/** A dashboard session (owner or member) of one tenant. */
export interface Session {
  slug: string;
  tenantId: string;
  userId: string;
  email: string;
  cookie: string;
  csrf: string;
}

/** A tenant signed up through onboarding, then set to a tier by the operator (here: the table). */
export async function tenantOnTier(t: TestApp, tier: 'free' | 'pro' | 'enterprise' = 'pro'): Promise<DashboardFixture> {
  const d = await signupTenant(t);
  await t.db.query(`UPDATE tenants SET tier = $2 WHERE id = $1`, [d.tenantId, tier]);
  await t.tenantChanged(d.tenantId);
  return d;
}

/** Invites someone with `role` and accepts: a second dashboard user of the tenant. */
export async function addMember(t: TestApp, owner: Session, role: 'owner' | 'member'): Promise<Session> {
  const email = uniqueEmail(role);
  const inv = await t
    .http()
    .post(`/v1/auth/dashboard/tenants/${owner.slug}/members`)
    .set('Cookie', owner.cookie)
    .set('X-CSRF-Token', owner.csrf)
    .send({ email, role })
    .expect(201);
  const acc = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(200);
  return { slug: owner.slug, tenantId: owner.tenantId, userId: acc.body.user.id, email, cookie: sessionCookie(acc.headers['set-cookie']), csrf: acc.body.csrf_token };
}

/** Thin request helpers carrying the session cookie (and CSRF on writes). */
export function as(t: TestApp, s: Session) {
  return {
    get: (url: string) => t.http().get(url).set('Cookie', s.cookie),
    post: (url: string, body?: object) => t.http().post(url).set('Cookie', s.cookie).set('X-CSRF-Token', s.csrf).send(body ?? {}),
    patch: (url: string, body: object) => t.http().patch(url).set('Cookie', s.cookie).set('X-CSRF-Token', s.csrf).send(body),
    delete: (url: string) => t.http().delete(url).set('Cookie', s.cookie).set('X-CSRF-Token', s.csrf),
  };
}

/** Registers an agent (201) and returns the answer (with client_secret). */
export async function registerAgent(t: TestApp, s: Session, body: object = {}): Promise<Record<string, any>> {
  const res = await as(t, s)
    .post(agentsUrl(s), { name: 'Mail assistant', scopes: ['openid', 'email', 'calendar.read'], grant_types: [TOKEN_EXCHANGE], ...body })
    .expect(201);
  return res.body;
}

export interface EndUser {
  userId: string;
  tenantId: string;
  accessToken: string;
  email: string;
}

const apiKeys = new Map<string, string>();

/** An end user of the tenant, registered through the real API (bearer access token). */
export async function endUser(t: TestApp, d: DashboardFixture | Session): Promise<EndUser> {
  let key = apiKeys.get(d.slug);
  if (!key) {
    key = (await createApiKey(t, d as DashboardFixture)).key;
    apiKeys.set(d.slug, key);
  }
  const email = uniqueEmail('enduser');
  const res = await t
    .http()
    .post('/v1/auth/register')
    .set('X-API-Key', key)
    .set('X-Forwarded-For', randomIp())
    .send({ email, password: STRONG_PASSWORD, consent: true })
    .expect(201);
  return { userId: res.body.user.id, tenantId: d.tenantId, accessToken: res.body.access_token, email };
}

/** An agent token as the token exchange mints it without an audience (contract "Tokens"): sub = user, act.sub = agent, no sid, aud = this service. */
export async function agentToken(t: TestApp, user: { userId: string; tenantId: string }, agentId: string, ttl = 300): Promise<{ token: string; iat: number }> {
  const { token, claims } = await t.app.get(JwtService).sign(
    {
      sub: user.userId,
      tenant_id: user.tenantId,
      scope: 'openid email',
      amr: ['pwd', 'tx'],
      aal: 'AAL1',
      role: 'member',
      is_anonymous: false,
      act: { sub: agentId },
    },
    ttl,
  );
  return { token, iat: claims.iat };
}

/** A bearer call through the real guard (GET /v1/auth/me). */
export const bearerCall = (t: TestApp, token: string) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`);

/** Waits until the next whole second starts (JWT iat has whole seconds). */
export async function nextSecond(): Promise<void> {
  await sleep(1000 - (Date.now() % 1000) + 20);
}

/** A Redis client without key prefix, to inspect and delete this test file's keys. */
export function rawRedis(): Redis {
  return new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
}

/**
 * What the failed sign-in throttle (LoginThrottleService) keeps in Redis for an account of a realm:
 * its known client addresses (the sorted set) and its account-wide failure count.
 */
export async function throttleState(realm: string, account: string): Promise<{ known: number; failures: number }> {
  const prefix = process.env.REDIS_KEY_PREFIX as string;
  const acct = expectedKeySubject(`${realm}:${account}`);
  const redis = rawRedis();
  try {
    // an erased account's set holds only its mark (LoginThrottleService.forgetAccounts), no address
    const known = (await redis.zrange(`${prefix}login-trusted:z:${acct}`, 0, -1)).filter((m) => m !== '~erased').length;
    return { known, failures: Number((await redis.get(`${prefix}{rl:acct:${acct}:login-fail}:hits`)) ?? 0) };
  } finally {
    redis.disconnect();
  }
}

/** Deletes every key of this test file's prefix (never FLUSHALL: other test files share the server). */
export async function flushTestPrefix(redis: Redis): Promise<number> {
  const prefix = process.env.REDIS_KEY_PREFIX as string;
  let n = 0;
  for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 1000 })) {
    if ((keys as string[]).length) n += await redis.del(...(keys as string[]));
  }
  return n;
}

/** Inserts agent_actions rows as the token endpoint would (hash prefixes only). */
export async function insertAction(
  t: TestApp,
  row: { tenantId: string; agentId: string; action?: string; actorUserId?: string | null; createdAt?: Date; ip?: string; ua?: string; resource?: string },
): Promise<string> {
  const svc = t.app.get(AgentsService);
  const [sql, params] = svc.recordActionSql(
    {
      tenantId: row.tenantId,
      agentClientId: row.agentId,
      action: row.action ?? 'token_exchange',
      actorUserId: row.actorUserId ?? null,
      resource: row.resource ?? 'https://api.example.test',
      methodOrEvent: 'POST /oauth/token',
      jti: 'jti-' + Math.random().toString(36).slice(2),
      scopeUsed: 'openid email',
      ip: row.ip ?? '203.0.113.7',
      userAgent: row.ua ?? 'agent-sdk/1.0',
    },
    1,
  );
  const [r] = await t.db.query<{ id: string }>(`WITH i AS (${sql} RETURNING id) SELECT id FROM i`, params);
  if (row.createdAt) await t.db.query(`UPDATE agent_actions SET created_at = $2 WHERE id = $1`, [r.id, row.createdAt]);
  return r.id;
}
