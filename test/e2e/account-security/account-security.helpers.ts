import { createHash } from 'crypto';
import { INestApplicationContext } from '@nestjs/common';
import { decode } from 'jsonwebtoken';
import { startWorkerWith } from '../../setup/worker';
import { createApiKey, DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createIsolatedDatabase, IsolatedDatabase } from '../../setup/isolated-db';
import { CapturedMail, SmtpCapture, startSmtpCapture } from '../../setup/smtp-capture';

export const ACCOUNTS_URL = 'https://accounts.example.test';

/** The API and the worker on a database of this test file's own, and a real SMTP server. */
export interface MailWorld {
  t: TestApp;
  smtp: SmtpCapture;
  worker: INestApplicationContext;
  isolated: IsolatedDatabase;
  /** the next not yet taken message matching `predicate` (each message is taken once) */
  nextMail: (predicate: (m: CapturedMail) => boolean, timeoutMs?: number) => Promise<CapturedMail>;
  /** a second API on the same database with other settings (limits, captcha) */
  extraApp: (env: Record<string, string>) => Promise<TestApp>;
  close: () => Promise<void>;
}

/**
 * Starts what the account-security flows need end to end: the API, the worker (outbox relay +
 * mail processor) in-process and an SMTP capture server; links point at ACCOUNTS_URL. The
 * database is the file's own, so the worker relays only this file's mail.
 */
export async function startMailWorld(env: Record<string, string> = {}): Promise<MailWorld> {
  const isolated = await createIsolatedDatabase();
  const smtp = await startSmtpCapture();
  const overrides: Record<string, string> = { DATABASE_URL: isolated.url, SMTP_URL: smtp.url, OUTBOX_POLL_MS: '50', ACCOUNTS_URL, ...env };
  const worker = await startWorkerWith(overrides);
  const t = await createTestApp(overrides);
  const extras: TestApp[] = [];
  const taken = new Set<CapturedMail>();
  return {
    t,
    smtp,
    worker,
    isolated,
    nextMail: async (predicate, timeoutMs = 15_000) => {
      const m = await smtp.waitFor((x) => !taken.has(x) && predicate(x), timeoutMs);
      taken.add(m);
      return m;
    },
    extraApp: async (more) => {
      const app = await createTestApp({ ...overrides, ...more });
      extras.push(app);
      return app;
    },
    close: async () => {
      for (const a of extras) await a.close();
      await t.close();
      await worker.close();
      await smtp.close();
      await isolated.drop();
    },
  };
}

/** The token of the `${ACCOUNTS_URL}<path>?token=...` link in the text part (the HTML part must carry the same link). */
export function linkToken(m: CapturedMail, path: string): string {
  const re = new RegExp(`${ACCOUNTS_URL.replace(/[.]/g, '\\.')}${path.replace(/[/]/g, '\\/')}\\?token=([A-Za-z0-9%_.~-]+)`);
  const match = re.exec(m.text);
  if (!match) throw new Error(`no ${path} link in mail "${m.subject}":\n${m.text}`);
  expect(m.html).toContain(`href="${ACCOUNTS_URL}${path}?token=${match[1]}"`);
  return decodeURIComponent(match[1]);
}

/** The 6-digit code of a code mail (text part; the HTML part shows it too). */
export function mailCode(m: CapturedMail): string {
  const match = /^(\d{6})$/m.exec(m.text);
  if (!match) throw new Error(`no code in mail "${m.subject}":\n${m.text}`);
  expect(m.html).toContain(match[1]);
  return match[1];
}

export const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

export function claims(accessToken: string): Record<string, unknown> {
  return decode(accessToken) as Record<string, unknown>;
}

/** A tenant signed up through onboarding, with an API key and its dashboard owner session. */
export interface TenantWithKey extends DashboardFixture {
  apiKey: string;
  name: string;
}

export async function tenantWithKey(t: TestApp, settings: Record<string, unknown> = {}): Promise<TenantWithKey> {
  const name = `Acme ${Math.random().toString(36).slice(2, 8)}`;
  const d = await signupTenant(t, name);
  const { key } = await createApiKey(t, d);
  if (Object.keys(settings).length) await patchSecurity(t, d, settings).expect(200);
  return { ...d, apiKey: key, name };
}

export function patchSecurity(t: TestApp, d: DashboardFixture, body: unknown) {
  return t.http().patch(`/v1/auth/dashboard/tenants/${d.slug}/settings/security`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send(body as object);
}

/** POST to an end-user endpoint with the tenant's key from a fresh client address. */
export function post(t: TestApp, path: string, key: string | undefined, body: unknown, ip = randomIp()) {
  const r = t.http().post(path).set('X-Forwarded-For', ip);
  if (key) r.set('X-API-Key', key);
  return r.send(body as object);
}

export function bearerPost(t: TestApp, path: string, accessToken: string, body: unknown, ip = randomIp()) {
  return t.http().post(path).set('X-Forwarded-For', ip).set('Authorization', `Bearer ${accessToken}`).send(body as object);
}

export interface RegisteredUser {
  email: string;
  password: string;
  id: string;
  access: string;
  refresh: string;
}

export async function register(t: TestApp, key: string, email = uniqueEmail(), password = STRONG_PASSWORD): Promise<RegisteredUser> {
  const res = await post(t, '/v1/auth/register', key, { email, password, consent: true }).expect(201);
  return { email, password, id: res.body.user.id, access: res.body.access_token, refresh: res.body.refresh_token };
}

export async function login(t: TestApp, key: string, email: string, password = STRONG_PASSWORD): Promise<{ access: string; refresh: string }> {
  const res = await post(t, '/v1/auth/login', key, { email, password }).expect(200);
  return { access: res.body.access_token, refresh: res.body.refresh_token };
}

/** The rows of this database's outbox addressed to `to` (mail is written there before the API answers). */
export async function outboxTo(t: TestApp, to: string): Promise<{ event_type: string; payload: string; secret_enc: string | null }[]> {
  return t.db.query(`SELECT event_type, payload::text AS payload, secret_enc FROM outbox WHERE lower(payload->>'to') = lower($1) ORDER BY id`, [to]);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Median of a list of numbers. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
