import { randomUUID } from 'crypto';
import { TestApp, randomIp, STRONG_PASSWORD, uniqueEmail } from '../setup/app';

export interface DashboardFixture {
  tenantId: string;
  slug: string;
  userId: string;
  email: string;
  password: string;
  cookie: string;
  csrf: string;
}

/** The `authp_dashboard=...` pair of a Set-Cookie answer. */
export function sessionCookie(setCookie: string | string[] | undefined): string {
  const list = Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : [];
  const c = list.find((x) => x.startsWith('authp_dashboard='));
  if (!c) throw new Error('no dashboard session cookie');
  return c.split(';')[0];
}

/** Signs up a tenant through the real onboarding endpoint. */
export async function signupTenant(t: TestApp, name = `Acme ${randomUUID().slice(0, 6)}`): Promise<DashboardFixture> {
  const email = uniqueEmail('owner');
  const res = await t
    .http()
    .post('/v1/onboarding/signup')
    .set('X-Forwarded-For', randomIp())
    .send({ email, password: STRONG_PASSWORD, tenant_name: name, consent_terms: true, consent_privacy: true })
    .expect(201);
  return {
    tenantId: res.body.tenant.id,
    slug: res.body.tenant.slug,
    userId: res.body.user.id,
    email,
    password: STRONG_PASSWORD,
    cookie: sessionCookie(res.headers['set-cookie']),
    csrf: res.body.csrf_token,
  };
}

/** Creates an API key through the dashboard API and returns the key (shown once). */
export async function createApiKey(t: TestApp, d: DashboardFixture, name = 'server'): Promise<{ id: string; key: string }> {
  const res = await t
    .http()
    .post(`/v1/auth/dashboard/tenants/${d.slug}/api-keys`)
    .set('Cookie', d.cookie)
    .set('X-CSRF-Token', d.csrf)
    .send({ name })
    .expect(201);
  return { id: res.body.id, key: res.body.key };
}
