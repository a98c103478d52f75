import * as client from 'openid-client';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { AgentFixture } from '../../factories/agent.factory';
import { TenantFixture } from '../../factories/tenant.factory';
import { freePortBelowEphemeral } from '../../setup/ports';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** The payload of a JWT (no verification). */
export function claims(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
}

/** HTTP Basic credentials as RFC 6749 section 2.3.1 builds them (form-urlencoded, then base64). */
export function basic(id: string, secret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${enc(id)}:${enc(secret)}`).toString('base64')}`;
}

export interface ListeningApp extends TestApp {
  baseUrl: string;
}

/**
 * The real API listening on 127.0.0.1 with PUBLIC_BASE_URL (the issuer) set to its own address,
 * so that openid-client discovers it exactly as a deployed client would.
 */
export async function startListeningApp(env: Record<string, string> = {}): Promise<ListeningApp> {
  // below the ephemeral range: the app's own connections, opened before it listens, cannot take it
  const port = await freePortBelowEphemeral();
  const baseUrl = `http://127.0.0.1:${port}`;
  const t = await createTestApp({ PUBLIC_BASE_URL: baseUrl, ...env });
  await t.app.listen({ port, host: '127.0.0.1' });
  return Object.assign(t, { baseUrl });
}

/** openid-client configuration from discovery, for an agent client using Basic or body authentication. */
export async function discoverAs(baseUrl: string, agent: { id: string; secret: string }, method: 'basic' | 'post' = 'basic'): Promise<client.Configuration> {
  const auth = method === 'basic' ? client.ClientSecretBasic(agent.secret) : client.ClientSecretPost(agent.secret);
  return client.discovery(new URL(baseUrl), agent.id, undefined, auth, { execute: [client.allowInsecureRequests] });
}

/** RFC 8693 exchange through openid-client. */
export function exchange(config: client.Configuration, subjectToken: string, extra: Record<string, string> = {}) {
  return client.genericGrantRequest(config, TOKEN_EXCHANGE, {
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN_TYPE,
    ...extra,
  });
}

/** The OAuth error an openid-client call failed with: `{status, error, error_description, wwwAuthenticate}`. */
export async function oauthFailure(p: Promise<unknown>): Promise<{ status: number; error?: string; error_description?: string; wwwAuthenticate?: string | null; retryAfter?: string | null }> {
  try {
    await p;
  } catch (e) {
    if (e instanceof client.ResponseBodyError) {
      return { status: e.status, error: e.error, error_description: e.error_description, wwwAuthenticate: e.response.headers.get('www-authenticate'), retryAfter: e.response.headers.get('retry-after') };
    }
    if (e instanceof client.WWWAuthenticateChallengeError) {
      const body = (await e.response.json().catch(() => ({}))) as { error?: string; error_description?: string };
      return { status: e.status, error: body.error, error_description: body.error_description, wwwAuthenticate: e.response.headers.get('www-authenticate') };
    }
    throw e;
  }
  throw new Error('expected the OAuth request to fail');
}

export interface RegisteredUser {
  id: string;
  email: string;
  access_token: string;
  refresh_token: string;
}

/** Registers an end user through the real API (its access token is a subject token). */
export async function registerUser(t: TestApp, tenant: TenantFixture): Promise<RegisteredUser> {
  const email = uniqueEmail();
  const res = await t
    .http()
    .post('/v1/auth/register')
    .set('X-API-Key', tenant.apiKey)
    .set('X-Forwarded-For', randomIp())
    .send({ email, password: STRONG_PASSWORD, consent: true })
    .expect(201);
  return { id: res.body.user.id, email, access_token: res.body.access_token, refresh_token: res.body.refresh_token };
}

/** A fresh session (and subject token with a new jti) for an existing user. */
export async function login(t: TestApp, tenant: TenantFixture, email: string): Promise<{ access_token: string; refresh_token: string }> {
  const res = await t
    .http()
    .post('/v1/auth/login')
    .set('X-API-Key', tenant.apiKey)
    .set('X-Forwarded-For', randomIp())
    .send({ email, password: STRONG_PASSWORD })
    .expect(200);
  return { access_token: res.body.access_token, refresh_token: res.body.refresh_token };
}

/** A token-exchange form body for supertest. */
export function exchangeBody(subjectToken: string, extra: Record<string, string> = {}): Record<string, string> {
  return { grant_type: TOKEN_EXCHANGE, subject_token: subjectToken, subject_token_type: ACCESS_TOKEN_TYPE, ...extra };
}

/** supertest POST of a form to /oauth/token with HTTP Basic credentials of the agent. */
export function postToken(t: TestApp, agent: AgentFixture | { id: string; secret: string } | null, form: Record<string, string | string[]>) {
  const req = t.http().post('/oauth/token').type('form');
  if (agent) req.set('Authorization', basic(agent.id, agent.secret));
  return req.send(form);
}

/** The audit rows of a type naming a client: an agent (`agent_client_id`) or a legacy OAuth client (`oauth_client_id`). */
export async function auditRows(t: TestApp, type: string, clientId: string): Promise<{ metadata: Record<string, unknown>; actor_id: string; target_id: string; severity: string; created_at: Date }[]> {
  return t.db.query(
    `SELECT metadata, actor_id, target_id, severity, created_at FROM audit_events WHERE type = $1 AND $2 IN (metadata->>'agent_client_id', metadata->>'oauth_client_id') ORDER BY created_at DESC`,
    [type, clientId],
  );
}
