import { EnvelopeCipher } from '../../../src/shared/crypto/envelope-cipher';
import { createApiKey, DashboardFixture, sessionCookie, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createAgent } from '../../factories/agent.factory';
import { claims, exchangeBody, postToken } from '../oauth/oauth-helpers';

const SID = `AC${'0123456789abcdef'.repeat(2)}`;
const MSID = `MG${'fedcba9876543210'.repeat(2)}`;
const AUTH_TOKEN = 'tw-auth-token-0123456789abcdef-XYZ';

describe('account security: tenant security settings and email domains (spec 2.8, PutEmailDomainsRequest)', () => {
  let t: TestApp;
  let owner: DashboardFixture;
  let member: { cookie: string; csrf: string };
  let stranger: DashboardFixture;

  beforeAll(async () => {
    // one owner session makes every write of this file (the per-session limit has its own tests)
    t = await createTestApp({ RATE_LIMIT_AUTH_WRITE_MAX: '1000' });
    owner = await signupTenant(t);
    stranger = await signupTenant(t);
    const inv = await t
      .http()
      .post(`/v1/auth/dashboard/tenants/${owner.slug}/members`)
      .set('Cookie', owner.cookie)
      .set('X-CSRF-Token', owner.csrf)
      .send({ email: uniqueEmail('member'), role: 'member' })
      .expect(201);
    const acc = await t.http().post('/v1/auth/dashboard/invites/accept').set('X-Forwarded-For', randomIp()).send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    member = { cookie: sessionCookie(acc.headers['set-cookie']), csrf: acc.body.csrf_token };
  });
  afterAll(() => t.close());

  const sec = `/v1/auth/dashboard/tenants`;
  const get = (who: { cookie: string }, path: string, slug = owner.slug) => t.http().get(`${sec}/${slug}/settings/${path}`).set('Cookie', who.cookie);
  const write = (method: 'patch' | 'put', who: { cookie: string; csrf: string }, path: string, body: unknown, slug = owner.slug) =>
    t.http()[method](`${sec}/${slug}/settings/${path}`).set('Cookie', who.cookie).set('X-CSRF-Token', who.csrf).send(body as object);
  const patch = (body: unknown, who: { cookie: string; csrf: string } = owner) => write('patch', who, 'security', body);
  const put = (body: unknown, who: { cookie: string; csrf: string } = owner) => write('put', who, 'email-domains', body);
  /** Writes a setting of tenant `d`, then the severity of the audit row of `type` it wrote. */
  const severityOfWrite = async (d: DashboardFixture, method: 'patch' | 'put', path: string, body: object, type: string): Promise<string> => {
    await write(method, d, path, body, d.slug).expect(200);
    const [row] = await t.db.query<{ severity: string }>(
      `SELECT severity FROM audit_events WHERE tenant_id = $1 AND type = $2 ORDER BY created_at DESC, id DESC LIMIT 1`,
      [d.tenantId, type],
    );
    return row.severity;
  };
  const audits = async (type: string) =>
    t.db.query<{ metadata: Record<string, unknown>; actor_id: string; severity: string }>(
      `SELECT metadata, actor_id, severity FROM audit_events WHERE tenant_id = $1 AND type = $2 ORDER BY created_at`,
      [owner.tenantId, type],
    );

  describe('security settings', () => {
    it('GET answers every spec 2.8 field with its default (members read too)', async () => {
      const fresh = await signupTenant(t);
      const res = await get(fresh, 'security', fresh.slug).expect(200);
      expect(res.body).toEqual({
        mfa_policy: 'optional',
        mfa_grace_period_days: 7,
        mfa_required_since: null,
        block_disposable_emails: false,
        block_email_subaddresses: false,
        automatic_account_linking_enabled: false,
        explicit_account_linking_enabled: false,
        sms_otp_enabled: false,
        sms_otp_monthly_cap: 1000,
        byok_twilio_account_sid: null,
        byok_twilio_auth_token_set: false,
        byok_twilio_messaging_service_sid: null,
        magic_link_enabled: false,
        email_otp_enabled: false,
        email_otp_captcha_required: false,
        minor_protection_enabled: false,
        sms_allowed_countries: null,
      });
      await get(member, 'security').expect(200);
    });

    it('PATCH sets every field; GET reads them back; the BYOK auth token is stored encrypted and never returned', async () => {
      const body = {
        mfa_grace_period_days: 30,
        block_disposable_emails: true,
        block_email_subaddresses: true,
        automatic_account_linking_enabled: true,
        explicit_account_linking_enabled: true,
        sms_otp_enabled: true,
        sms_otp_monthly_cap: 100000,
        byok_twilio_account_sid: SID,
        byok_twilio_auth_token: AUTH_TOKEN,
        byok_twilio_messaging_service_sid: MSID,
        magic_link_enabled: true,
        email_otp_enabled: true,
        sms_allowed_countries: ['DE', 'FR', 'US'],
      };
      const res = await patch(body).expect(200);
      const { byok_twilio_auth_token: _tok, ...echo } = body;
      expect(res.body).toMatchObject({ ...echo, byok_twilio_auth_token_set: true });
      expect(res.body).not.toHaveProperty('byok_twilio_auth_token');
      expect(JSON.stringify(res.body)).not.toContain(AUTH_TOKEN);
      const read = await get(owner, 'security').expect(200);
      expect(read.body).toEqual(res.body);
      expect(JSON.stringify(read.body)).not.toContain(AUTH_TOKEN);

      const [row] = await t.db.query<{ byok_twilio_auth_token_enc: string }>(`SELECT byok_twilio_auth_token_enc FROM tenants WHERE id = $1`, [owner.tenantId]);
      expect(row.byok_twilio_auth_token_enc).toMatch(/^v1\./);
      expect(row.byok_twilio_auth_token_enc).not.toContain(AUTH_TOKEN);
      expect(t.app.get(EnvelopeCipher).decryptString(row.byok_twilio_auth_token_enc, `byok_twilio_auth_token:${owner.tenantId}`)).toBe(AUTH_TOKEN);
      const [audit] = (await audits('tenant.security_settings_updated')).slice(-1);
      expect(audit.actor_id).toBe(owner.userId);
      expect(JSON.stringify(audit.metadata)).not.toContain(AUTH_TOKEN);
      expect(audit.metadata.changed).toEqual(expect.arrayContaining(Object.keys(body)));
    });

    it('PATCH is partial: fields not sent keep their values', async () => {
      await patch({ sms_otp_monthly_cap: 5 }).expect(200);
      const res = await patch({ magic_link_enabled: false }).expect(200);
      expect(res.body).toMatchObject({ sms_otp_monthly_cap: 5, magic_link_enabled: false });
    });

    it('null clears the BYOK fields; null or [] clears the country list', async () => {
      await patch({ byok_twilio_account_sid: SID, byok_twilio_auth_token: AUTH_TOKEN, byok_twilio_messaging_service_sid: MSID, sms_allowed_countries: ['GB'] }).expect(200);
      const cleared = await patch({ byok_twilio_account_sid: null, byok_twilio_auth_token: null, byok_twilio_messaging_service_sid: null, sms_allowed_countries: [] }).expect(200);
      expect(cleared.body).toMatchObject({ byok_twilio_account_sid: null, byok_twilio_auth_token_set: false, byok_twilio_messaging_service_sid: null, sms_allowed_countries: null });
      const [row] = await t.db.query<{ enc: string | null; c: string[] | null }>(`SELECT byok_twilio_auth_token_enc AS enc, sms_allowed_countries AS c FROM tenants WHERE id = $1`, [owner.tenantId]);
      expect(row).toEqual({ enc: null, c: null });
      await patch({ sms_allowed_countries: ['GB'] }).expect(200);
      expect((await patch({ sms_allowed_countries: null }).expect(200)).body.sms_allowed_countries).toBeNull();
    });

    it('sms_allowed_countries accepts a repeated entry (spec 2.8 does not forbid one) and stores it once', async () => {
      expect((await patch({ sms_allowed_countries: ['US', 'FR', 'US'] }).expect(200)).body.sms_allowed_countries).toEqual(['US', 'FR']);
    });

    it('sms_allowed_countries accepts 300 entries', async () => {
      const codes = Array.from({ length: 300 }, (_, i) => String.fromCharCode(65 + Math.floor(i / 26), 65 + (i % 26)));
      expect((await patch({ sms_allowed_countries: codes }).expect(200)).body.sms_allowed_countries).toHaveLength(300);
    });

    it('mfa_policy switching to required starts the grace period (mfa_required_since = now); back to optional clears it', async () => {
      const before = Date.now();
      const req = await patch({ mfa_policy: 'required' }).expect(200);
      const since = Date.parse(req.body.mfa_required_since);
      expect(since).toBeGreaterThanOrEqual(before - 5000);
      expect(since).toBeLessThanOrEqual(Date.now() + 5000);
      // staying required keeps the start
      expect((await patch({ mfa_policy: 'required', mfa_grace_period_days: 3 }).expect(200)).body.mfa_required_since).toBe(req.body.mfa_required_since);
      const opt = await patch({ mfa_policy: 'optional' }).expect(200);
      expect(opt.body.mfa_required_since).toBeNull();
      const [audit] = (await audits('tenant.security_settings_updated')).slice(-1);
      expect(audit.severity).toBe('medium'); // weakening
      expect(audit.metadata.changes).toEqual({ mfa_policy: { from: 'required', to: 'optional' } });
    });

    it('every weakening change is audited at medium severity, a tightening or neutral one at info', async () => {
      const d = await signupTenant(t);
      await write('patch', d, 'security', { mfa_grace_period_days: 7 }, d.slug).expect(200);
      const severityOf = (body: object) => severityOfWrite(d, 'patch', 'security', body, 'tenant.security_settings_updated');
      const seen = {
        // optional to required with a longer grace than stored: users get it from now, nobody had one before
        required: await severityOf({ mfa_policy: 'required', mfa_grace_period_days: 9 }),
        graceLonger: await severityOf({ mfa_grace_period_days: 30 }),
        graceShorter: await severityOf({ mfa_grace_period_days: 3 }),
        optional: await severityOf({ mfa_policy: 'optional' }),
        graceLongerOptional: await severityOf({ mfa_grace_period_days: 20 }),
        blockOn: await severityOf({ block_disposable_emails: true }),
        blockOff: await severityOf({ block_disposable_emails: false }),
        linkingOn: await severityOf({ automatic_account_linking_enabled: true }),
        linkingOff: await severityOf({ automatic_account_linking_enabled: false }),
        countries: await severityOf({ sms_allowed_countries: ['DE', 'FR'] }),
        countriesNarrower: await severityOf({ sms_allowed_countries: ['DE'] }),
        countriesWider: await severityOf({ sms_allowed_countries: ['DE', 'US'] }),
        countriesAll: await severityOf({ sms_allowed_countries: null }),
      };
      expect(seen).toEqual({
        required: 'info', graceLonger: 'medium', graceShorter: 'info', optional: 'medium', graceLongerOptional: 'info',
        blockOn: 'info', blockOff: 'medium', linkingOn: 'medium', linkingOff: 'info',
        // from every country (none listed) to a list: a narrowing
        countries: 'info', countriesNarrower: 'info', countriesWider: 'medium', countriesAll: 'medium',
      });
    });

    it('one audit event per change; none when nothing changes', async () => {
      await patch({ sms_otp_monthly_cap: 77 }).expect(200);
      const n = (await audits('tenant.security_settings_updated')).length;
      await patch({ sms_otp_monthly_cap: 77 }).expect(200);
      await patch({}).expect(200);
      expect((await audits('tenant.security_settings_updated')).length).toBe(n);
    });

    it.each([
      ['mfa_policy not in the enum', { mfa_policy: 'always' }, 'mfa_policy'],
      ['mfa_policy null', { mfa_policy: null }, 'mfa_policy'],
      ['mfa_grace_period_days 2', { mfa_grace_period_days: 2 }, 'mfa_grace_period_days'],
      ['mfa_grace_period_days 31', { mfa_grace_period_days: 31 }, 'mfa_grace_period_days'],
      ['mfa_grace_period_days 3.5', { mfa_grace_period_days: 3.5 }, 'mfa_grace_period_days'],
      ['mfa_grace_period_days as a string', { mfa_grace_period_days: '7' }, 'mfa_grace_period_days'],
      ['block_disposable_emails as a string', { block_disposable_emails: 'true' }, 'block_disposable_emails'],
      ['block_email_subaddresses null', { block_email_subaddresses: null }, 'block_email_subaddresses'],
      ['automatic_account_linking_enabled as a number', { automatic_account_linking_enabled: 1 }, 'automatic_account_linking_enabled'],
      ['explicit_account_linking_enabled as a string', { explicit_account_linking_enabled: 'yes' }, 'explicit_account_linking_enabled'],
      ['sms_otp_enabled null', { sms_otp_enabled: null }, 'sms_otp_enabled'],
      ['sms_otp_monthly_cap -1', { sms_otp_monthly_cap: -1 }, 'sms_otp_monthly_cap'],
      ['sms_otp_monthly_cap 100001', { sms_otp_monthly_cap: 100001 }, 'sms_otp_monthly_cap'],
      ['sms_otp_monthly_cap 1.5', { sms_otp_monthly_cap: 1.5 }, 'sms_otp_monthly_cap'],
      ['byok_twilio_account_sid with uppercase hex', { byok_twilio_account_sid: `AC${'A'.repeat(32)}` }, 'byok_twilio_account_sid'],
      ['byok_twilio_account_sid with another prefix', { byok_twilio_account_sid: `MG${'a'.repeat(32)}` }, 'byok_twilio_account_sid'],
      ['byok_twilio_account_sid too short', { byok_twilio_account_sid: `AC${'a'.repeat(31)}` }, 'byok_twilio_account_sid'],
      ['byok_twilio_account_sid too long', { byok_twilio_account_sid: `AC${'a'.repeat(33)}` }, 'byok_twilio_account_sid'],
      ['byok_twilio_auth_token of 31 characters', { byok_twilio_auth_token: 't'.repeat(31) }, 'byok_twilio_auth_token'],
      ['byok_twilio_auth_token of 129 characters', { byok_twilio_auth_token: 't'.repeat(129) }, 'byok_twilio_auth_token'],
      ['byok_twilio_auth_token as a number', { byok_twilio_auth_token: 1234567890123 }, 'byok_twilio_auth_token'],
      ['byok_twilio_messaging_service_sid with another prefix', { byok_twilio_messaging_service_sid: `AC${'a'.repeat(32)}` }, 'byok_twilio_messaging_service_sid'],
      ['byok_twilio_messaging_service_sid with a non-hex character', { byok_twilio_messaging_service_sid: `MG${'g'.repeat(32)}` }, 'byok_twilio_messaging_service_sid'],
      ['magic_link_enabled as a string', { magic_link_enabled: 'false' }, 'magic_link_enabled'],
      ['email_otp_enabled null', { email_otp_enabled: null }, 'email_otp_enabled'],
      ['sms_allowed_countries lowercase (refused, not normalized)', { sms_allowed_countries: ['us'] }, 'sms_allowed_countries'],
      ['sms_allowed_countries mixed case', { sms_allowed_countries: ['Us'] }, 'sms_allowed_countries'],
      ['sms_allowed_countries of 3 letters', { sms_allowed_countries: ['USA'] }, 'sms_allowed_countries'],
      ['sms_allowed_countries of 1 letter', { sms_allowed_countries: ['U'] }, 'sms_allowed_countries'],
      ['sms_allowed_countries with a number', { sms_allowed_countries: [1] }, 'sms_allowed_countries'],
      ['sms_allowed_countries not an array', { sms_allowed_countries: 'US' }, 'sms_allowed_countries'],
      ['sms_allowed_countries with 301 entries', { sms_allowed_countries: Array.from({ length: 301 }, () => 'US') }, 'sms_allowed_countries'],
      ['an unknown property', { passkey_rp_id: 'example.com' }, 'passkey_rp_id'],
      ['a read-only field', { byok_twilio_auth_token_set: true }, 'byok_twilio_auth_token_set'],
      ['minor_protection_enabled (not a spec 2.8 field)', { minor_protection_enabled: true }, 'minor_protection_enabled'],
      ['email_otp_captcha_required (not a spec 2.8 field)', { email_otp_captcha_required: true }, 'email_otp_captcha_required'],
    ])('PATCH rejects %s with 400 request/invalid, changing nothing', async (_n, body, field) => {
      const before = (await get(owner, 'security').expect(200)).body;
      const res = await patch(body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e: { field: string }) => e.field.split('.')[0])).toContain(field);
      expect((await get(owner, 'security').expect(200)).body).toEqual(before);
    });

    it('members read but cannot write (403 auth/forbidden); another tenant is 404; CSRF and a session are required', async () => {
      expect((await patch({ magic_link_enabled: true }, member).expect(403)).body.code).toBe('auth/forbidden');
      expect((await get(owner, 'security', stranger.slug).expect(404)).body.code).toBe('tenant/not_found');
      expect((await write('patch', owner, 'security', { magic_link_enabled: true }, stranger.slug).expect(404)).body.code).toBe('tenant/not_found');
      expect((await t.http().patch(`${sec}/${owner.slug}/settings/security`).set('Cookie', owner.cookie).send({}).expect(403)).body.code).toBe('csrf/invalid');
      await t.http().get(`${sec}/${owner.slug}/settings/security`).expect(401);
    });
  });

  describe('email domains', () => {
    it('a change that lets more addresses in (the allowlist dropped or widened, a blocked domain let in) is audited at medium severity, a narrowing at info', async () => {
      const d = await signupTenant(t);
      const severityOf = (body: object) => severityOfWrite(d, 'put', 'email-domains', body, 'tenant.email_domains_updated');
      const seen = {
        allowSet: await severityOf({ allowlist: ['corp.example', 'corp2.example'], blocklist: ['spam.example'] }),
        allowNarrower: await severityOf({ allowlist: ['corp.example'], blocklist: ['spam.example'] }),
        allowWider: await severityOf({ allowlist: ['corp.example', 'partner.example'], blocklist: ['spam.example'] }),
        blockMore: await severityOf({ allowlist: ['corp.example', 'partner.example'], blocklist: ['spam.example', 'junk.example'] }),
        unblocked: await severityOf({ allowlist: ['corp.example', 'partner.example'], blocklist: ['junk.example'] }),
        allowDropped: await severityOf({ allowlist: [], blocklist: ['junk.example'] }),
      };
      expect(seen).toEqual({ allowSet: 'info', allowNarrower: 'info', allowWider: 'medium', blockMore: 'info', unblocked: 'medium', allowDropped: 'medium' });
    });

    it('PUT replaces both lists, normalized to lower case (duplicates dropped); GET reads them; a missing list is empty', async () => {
      const res = await put({ allowlist: ['Example.COM', 'example.com', ' corp.example.org '], blocklist: ['@Spam.Example.'] }).expect(200);
      expect(res.body).toEqual({ allowlist: ['example.com', 'corp.example.org'], blocklist: ['spam.example'] });
      expect((await get(member, 'email-domains').expect(200)).body).toEqual(res.body);
      expect((await put({ blocklist: ['x.example'] }).expect(200)).body).toEqual({ allowlist: [], blocklist: ['x.example'] });
      expect((await put({}).expect(200)).body).toEqual({ allowlist: [], blocklist: [] });
      expect((await audits('tenant.email_domains_updated')).length).toBeGreaterThanOrEqual(3);
    });

    it('a PUT that changes nothing writes no audit event; a TLD, a punycode or Unicode name and a digit-led label are domains', async () => {
      expect((await put({ allowlist: ['xn--mnchen-3ya.de', '3com.example'], blocklist: ['ru'] }).expect(200)).body).toEqual({ allowlist: ['münchen.de', '3com.example'], blocklist: ['ru'] });
      const before = (await audits('tenant.email_domains_updated')).length;
      await put({ allowlist: ['MÜNCHEN.de', '3com.example'], blocklist: ['.ru.'.slice(1)] }).expect(200);
      expect((await audits('tenant.email_domains_updated')).length).toBe(before);
      await put({}).expect(200);
      expect((await audits('tenant.email_domains_updated')).length).toBe(before + 1);
    });

    it('accepts 100 entries of up to 253 characters', async () => {
      const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(58)}.io`;
      expect(long).toHaveLength(253);
      const list = Array.from({ length: 99 }, (_, i) => `d${i}.example`).concat(long);
      expect((await put({ allowlist: list }).expect(200)).body.allowlist).toHaveLength(100);
      await put({}).expect(200);
    });

    it('names the bound an entry broke: 254 characters is too long, not too short', async () => {
      const res = await put({ blocklist: ['ok.example', `${'a'.repeat(250)}.com`] }).expect(400);
      expect(res.body.errors).toEqual([{ field: 'blocklist', message: 'each value in blocklist must be shorter than or equal to 253 characters' }]);
    });

    it.each([
      ['101 allowlist entries', { allowlist: Array.from({ length: 101 }, (_, i) => `d${i}.example`) }, 'allowlist'],
      ['101 blocklist entries', { blocklist: Array.from({ length: 101 }, (_, i) => `d${i}.example`) }, 'blocklist'],
      ['an empty entry', { allowlist: [''] }, 'allowlist'],
      ['an entry of 254 characters', { blocklist: [`${'a'.repeat(250)}.com`] }, 'blocklist'],
      ['an entry that is not a string', { allowlist: [42] }, 'allowlist'],
      ['a list that is not an array', { allowlist: 'example.com' }, 'allowlist'],
      ['a null list', { blocklist: null }, 'blocklist'],
      ['an entry of blanks only', { allowlist: ['   '] }, 'allowlist'],
      ['an email address as entry', { blocklist: ['user@example.com'] }, 'blocklist'],
      ['a label of 64 characters', { blocklist: [`${'a'.repeat(64)}.com`] }, 'blocklist'],
      ['a zero-width space', { blocklist: ['\u200b'] }, 'blocklist'],
      ['a name IDNA would change (a soft hyphen)', { blocklist: ['evil.com\u00ad'] }, 'blocklist'],
      ['an empty label', { allowlist: ['corp..example.com'] }, 'allowlist'],
      ['a name no host can have', { allowlist: ['exa%mple.com'] }, 'allowlist'],
      ['a quote in a label', { blocklist: ['ab"c.com'] }, 'blocklist'],
      ['a wildcard inside a label', { blocklist: ['a*.com'] }, 'blocklist'],
      ['a wildcard below the leading one', { blocklist: ['*.*.com'] }, 'blocklist'],
      ['a label starting with a hyphen', { allowlist: ['-a.com'] }, 'allowlist'],
      ['an underscore', { allowlist: ['a_b.com'] }, 'allowlist'],
      ['an IP address (no address has a bare IP domain)', { allowlist: ['1.2.3.4'] }, 'allowlist'],
      ['a domain in both lists', { allowlist: ['x.example'], blocklist: ['X.example'] }, 'blocklist'],
      ['an unknown property', { allowlist: [], denylist: [] }, 'denylist'],
    ])('PUT rejects %s with 400 request/invalid', async (_n, body, field) => {
      const res = await put(body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e: { field: string }) => e.field.split('.')[0])).toContain(field);
    });

    it("names each offending entry once, at its position in the request (not in the normalized list)", async () => {
      const fields = async (body: unknown) => (await put(body).expect(400)).body.errors.map((e: { field: string }) => e.field);
      // the repeat of x.example (another case) is dropped on normalizing: a.example stays the request's third entry
      expect(await fields({ allowlist: ['a.example'], blocklist: ['x.example', 'X.example', 'a.example'] })).toEqual(['blocklist.2']);
      expect(await fields({ allowlist: ['a.example'], blocklist: ['not a domain', 'a.example'] })).toEqual(['blocklist.0', 'blocklist.1']);
      expect(await fields({ allowlist: ['a.example'], blocklist: ['A.example', 'a.example'] })).toEqual(['blocklist.0']);
    });

    it('members cannot write; another tenant is 404', async () => {
      expect((await put({ allowlist: [] }, member).expect(403)).body.code).toBe('auth/forbidden');
      await write('put', owner, 'email-domains', {}, stranger.slug).expect(404);
      await get(owner, 'email-domains', stranger.slug).expect(404);
    });
  });

  describe('passkey domain (spec UpdateTenantPasskeyDomainRequest)', () => {
    const accountsHost = new URL(process.env.ACCOUNTS_URL ?? 'http://localhost:3001').hostname;
    const putRp = (body: unknown, who: { cookie: string; csrf: string } = owner, slug = owner.slug) => write('put', who, 'passkey-domain', body, slug);

    it('GET starts unset, the host of ACCOUNTS_URL in effect (members read too)', async () => {
      const fresh = await signupTenant(t);
      expect((await get(fresh, 'passkey-domain', fresh.slug).expect(200)).body).toEqual({ passkey_rp_id: null, effective_rp_id: accountsHost });
      await get(member, 'passkey-domain').expect(200);
    });

    it('PUT sets a registrable domain or a name under one, null clears it; one audit event per change, none for a repeat', async () => {
      const before = (await audits('tenant.passkey_domain_updated')).length;
      expect((await putRp({ passkey_rp_id: 'example.com' }).expect(200)).body).toEqual({ passkey_rp_id: 'example.com', effective_rp_id: 'example.com' });
      expect((await get(member, 'passkey-domain').expect(200)).body).toEqual({ passkey_rp_id: 'example.com', effective_rp_id: 'example.com' });
      await putRp({ passkey_rp_id: 'example.com' }).expect(200);
      expect((await putRp({ passkey_rp_id: 'login.app.example.co.uk' }).expect(200)).body.passkey_rp_id).toBe('login.app.example.co.uk');
      expect((await putRp({ passkey_rp_id: 'localhost' }).expect(200)).body.passkey_rp_id).toBe('localhost');
      const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(58)}.io`;
      expect(long).toHaveLength(253);
      expect((await putRp({ passkey_rp_id: long }).expect(200)).body.passkey_rp_id).toBe(long);
      expect((await putRp({ passkey_rp_id: null }).expect(200)).body).toEqual({ passkey_rp_id: null, effective_rp_id: accountsHost });
      const rows = (await audits('tenant.passkey_domain_updated')).slice(before);
      expect(rows.map((r) => r.metadata)).toEqual([
        { from: null, to: 'example.com' },
        { from: 'example.com', to: 'login.app.example.co.uk' },
        { from: 'login.app.example.co.uk', to: 'localhost' },
        { from: 'localhost', to: long },
        { from: long, to: null },
      ]);
      expect(rows.every((r) => r.actor_id === owner.userId)).toBe(true);
      // an internationalized name in its (valid) A-label form, as the spec's pattern has it
      expect((await putRp({ passkey_rp_id: 'xn--mnchen-3ya.de' }).expect(200)).body.passkey_rp_id).toBe('xn--mnchen-3ya.de');
    });

    it.each([
      ['a missing key', {}],
      ['an empty string', { passkey_rp_id: '' }],
      ['254 characters', { passkey_rp_id: `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(59)}.io` }],
      ['upper-case letters (refused, not normalized)', { passkey_rp_id: 'Example.com' }],
      ['a scheme', { passkey_rp_id: 'https://example.com' }],
      ['a port', { passkey_rp_id: 'example.com:443' }],
      ['an underscore', { passkey_rp_id: 'my_app.example.com' }],
      ['a number', { passkey_rp_id: 42 }],
      ['a public suffix', { passkey_rp_id: 'com' }],
      ['a multi-label public suffix', { passkey_rp_id: 'co.uk' }],
      ['a private public suffix', { passkey_rp_id: 'github.io' }],
      ['an IPv4 address', { passkey_rp_id: '192.168.1.10' }],
      ['an empty label', { passkey_rp_id: 'app..example.com' }],
      ['a trailing dot', { passkey_rp_id: 'example.com.' }],
      ['a label starting with a hyphen', { passkey_rp_id: '-app.example.com' }],
      ['a label of 64 characters', { passkey_rp_id: `${'a'.repeat(64)}.example.com` }],
      ['an A-label IDNA cannot decode', { passkey_rp_id: 'xn--a.com' }],
      ['another invalid A-label', { passkey_rp_id: 'login.xn--zz.example.com' }],
      ['an unknown property', { passkey_rp_id: 'example.com', origin: 'https://example.com' }],
    ])('PUT rejects %s with 400 request/invalid, changing nothing', async (_n, body) => {
      await putRp({ passkey_rp_id: 'keep.example.com' }).expect(200);
      const res = await putRp(body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.length).toBeGreaterThan(0);
      expect((await get(owner, 'passkey-domain').expect(200)).body.passkey_rp_id).toBe('keep.example.com');
    });

    it('members cannot write (403); another tenant is 404; CSRF and a session are required', async () => {
      expect((await putRp({ passkey_rp_id: 'example.org' }, member).expect(403)).body.code).toBe('auth/forbidden');
      expect((await putRp({ passkey_rp_id: 'example.org' }, owner, stranger.slug).expect(404)).body.code).toBe('tenant/not_found');
      expect((await get(owner, 'passkey-domain', stranger.slug).expect(404)).body.code).toBe('tenant/not_found');
      expect((await get(stranger, 'passkey-domain', stranger.slug).expect(200)).body.passkey_rp_id).toBeNull();
      const noCsrf = await t.http().put(`${sec}/${owner.slug}/settings/passkey-domain`).set('Cookie', owner.cookie).send({ passkey_rp_id: 'example.org' }).expect(403);
      expect(noCsrf.body.code).toBe('csrf/invalid');
      await t.http().get(`${sec}/${owner.slug}/settings/passkey-domain`).expect(401);
      expect((await get(owner, 'passkey-domain').expect(200)).body.passkey_rp_id).not.toBe('example.org');
    });
  });

  describe('enforcement wherever an email enters (register, guest claim, invites), each rule with its own 422 code', () => {
    let d: DashboardFixture;
    let key: string;
    const register = (email: string, bearer?: string) => {
      const r = t.http().post('/v1/auth/register').set('X-Forwarded-For', randomIp()).set('X-API-Key', key);
      if (bearer) r.set('Authorization', `Bearer ${bearer}`);
      return r.send({ email, password: STRONG_PASSWORD, consent: true });
    };
    const setPolicy = async (security: object, domains: object) => {
      await write('patch', d, 'security', security, d.slug).expect(200);
      await write('put', d, 'email-domains', domains, d.slug).expect(200);
    };

    beforeAll(async () => {
      d = await signupTenant(t);
      key = (await createApiKey(t, d)).key;
    });

    it('block_disposable_emails (maintained list, subdomains too)', async () => {
      await setPolicy({ block_disposable_emails: true, block_email_subaddresses: false }, {});
      for (const email of ['a@mailinator.com', 'a@sub.mailinator.com', 'a@YOPMAIL.COM']) {
        const r = await register(email).expect(422);
        expect(r.body).toMatchObject({ status: 422, code: 'email/disposable_blocked' });
      }
      await register(uniqueEmail()).expect(201);
    });

    it('block_email_subaddresses (user+tag)', async () => {
      await setPolicy({ block_disposable_emails: false, block_email_subaddresses: true }, {});
      expect((await register(`a+tag.${Date.now()}@example.com`).expect(422)).body.code).toBe('email/subaddress_blocked');
      await setPolicy({ block_email_subaddresses: false }, {});
      await register(`a+tag.${Date.now()}@example.com`).expect(201);
    });

    it('blocklist, subdomains included', async () => {
      await setPolicy({}, { blocklist: ['blocked.example', 'fine.example'] });
      expect((await register('x@blocked.example').expect(422)).body.code).toBe('email/domain_blocked');
      expect((await register('x@eu.blocked.example').expect(422)).body.code).toBe('email/domain_blocked');
      // the domain of the comparison key: fullwidth and other compatibility forms are the same domain
      expect((await register('y@\ufb01ne.example').expect(422)).body.code).toBe('email/domain_blocked');
      await register(`x${Date.now()}@notblocked.example`).expect(201);
      // invisible characters IDNA would drop on the way to DNS are not a way around the list
      for (const email of ['x@blocked.example\u00ad', 'x@bl\u200bocked.example', 'x@blocked.example\u2060', 'x@blocked.exam\ufeffple']) {
        expect((await register(email).expect(400)).body).toMatchObject({ code: 'request/invalid', errors: [{ field: 'email' }] });
      }
    });

    it('allowlist, subdomains included', async () => {
      await setPolicy({}, { allowlist: ['corp.example'] });
      expect((await register('x@other.example').expect(422)).body.code).toBe('email/domain_not_allowed');
      expect((await register('x@evilcorp.example').expect(422)).body.code).toBe('email/domain_not_allowed');
      await register(`x${Date.now()}@corp.example`).expect(201);
      await register(`x${Date.now()}@team.corp.example`).expect(201);
    });

    it('a guest claimed by registering is checked too', async () => {
      await setPolicy({ block_disposable_emails: true }, {});
      await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true, default_user_role = 'read_only' WHERE id = $1`, [d.tenantId]);
      await t.tenantChanged(d.tenantId);
      const guest = await t.http().post('/v1/auth/anonymous').set('X-Forwarded-For', randomIp()).set('X-API-Key', key).send({}).expect(201);
      expect((await register('g@mailinator.com', guest.body.access_token).expect(422)).body.code).toBe('email/disposable_blocked');
    });

    it('dashboard invites are checked against the tenant policy', async () => {
      await setPolicy({ block_disposable_emails: true }, { blocklist: ['blocked.example'] });
      const invite = (email: string) =>
        t.http().post(`/v1/auth/dashboard/tenants/${d.slug}/members`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ email, role: 'member' });
      expect((await invite('m@mailinator.com').expect(422)).body.code).toBe('email/disposable_blocked');
      expect((await invite('m@blocked.example').expect(422)).body.code).toBe('email/domain_blocked');
      await invite(uniqueEmail('member')).expect(201);
    });

    it('accepting an invitation meets the policy of the day: a domain blocked since is 422 and the invitation stays unused', async () => {
      await setPolicy({}, {});
      const email = `m${Date.now()}@later.example`;
      const inv = await t.http().post(`/v1/auth/dashboard/tenants/${d.slug}/members`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ email, role: 'member' }).expect(201);
      await setPolicy({}, { blocklist: ['later.example'] });
      const accept = () => t.http().post('/v1/auth/dashboard/invites/accept').set('X-Forwarded-For', randomIp()).send({ token: inv.body.invite_token, password: STRONG_PASSWORD });
      expect((await accept().expect(422)).body.code).toBe('email/domain_blocked');
      expect(await t.db.query(`SELECT 1 FROM dashboard_users WHERE email = $1`, [email])).toHaveLength(0);
      await setPolicy({}, {});
      await accept().expect(200);
    });

    it("another tenant's policy does not apply", async () => {
      const other = await signupTenant(t);
      const otherKey = (await createApiKey(t, other)).key;
      await t.http().post('/v1/auth/register').set('X-Forwarded-For', randomIp()).set('X-API-Key', otherKey).send({ email: `a${Date.now()}@mailinator.com`, password: STRONG_PASSWORD, consent: true }).expect(201);
    });
  });

  describe('user token scopes (contract "Tokens": user_scopes)', () => {
    const putScopes = (body: unknown, who: { cookie: string; csrf: string } = owner, slug = owner.slug) => write('put', who, 'scopes', body, slug);

    it('GET answers the default; members read, only owners write; every entry a scope-token, 1-50 of them, no other property; cross-tenant 404', async () => {
      const fresh = await signupTenant(t);
      expect((await get(fresh, 'scopes', fresh.slug).expect(200)).body).toEqual({ user_scopes: ['openid', 'profile', 'email'] });
      await get(member, 'scopes').expect(200);
      expect((await putScopes({ user_scopes: ['openid'] }, member).expect(403)).body.code).toBe('auth/forbidden');
      expect((await putScopes({ user_scopes: ['openid'] }, stranger).expect(404)).body.code).toBe('tenant/not_found');
      for (const bad of [{}, { user_scopes: [] }, { user_scopes: 'openid email' }, { user_scopes: ['open id'] }, { user_scopes: ['a"b'] }, { user_scopes: ['a\\b'] }, { user_scopes: [''] },
        { user_scopes: ['x'.repeat(129)] }, { user_scopes: Array.from({ length: 51 }, (_, i) => `s${i}`) }, { user_scopes: [7] }, { user_scopes: null }, { user_scopes: ['openid'], extra: true }]) {
        const res = await putScopes(bad).expect(400);
        expect([JSON.stringify(bad), res.body.code]).toEqual([JSON.stringify(bad), 'request/invalid']);
      }
      await putScopes({ user_scopes: ['x'.repeat(128)] }).expect(200);
      await putScopes({ user_scopes: Array.from({ length: 50 }, (_, i) => `s${i}`) }).expect(200);
    });

    it('a change reaches new sign-ins and the next refresh of every session, audited once (a repeat changes nothing)', async () => {
      const d = await signupTenant(t);
      const { key } = await createApiKey(t, d);
      const email = uniqueEmail('scopes');
      const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
      const scopeOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).scope as string;
      expect(scopeOf(reg.body.access_token)).toBe('openid profile email');
      const body = { user_scopes: ['openid', 'profile', 'email', 'orders:read', 'orders:read'] };
      expect((await putScopes(body, d, d.slug).expect(200)).body).toEqual({ user_scopes: ['openid', 'profile', 'email', 'orders:read'] });
      await putScopes(body, d, d.slug).expect(200);
      const rows = await t.db.query<{ metadata: Record<string, unknown> }>(`SELECT metadata FROM audit_events WHERE tenant_id = $1 AND type = 'tenant.user_scopes_updated'`, [d.tenantId]);
      expect(rows).toEqual([{ metadata: { from: ['openid', 'profile', 'email'], to: ['openid', 'profile', 'email', 'orders:read'] } }]);
      const login = await t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).expect(200);
      expect(scopeOf(login.body.access_token)).toBe('openid profile email orders:read');
      const refreshed = await t.http().post('/v1/auth/refresh').set('X-API-Key', key).send({ refresh_token: reg.body.refresh_token }).expect(200);
      expect(scopeOf(refreshed.body.access_token)).toBe('openid profile email orders:read');
      expect((await get(d, 'scopes', d.slug).expect(200)).body).toEqual({ user_scopes: ['openid', 'profile', 'email', 'orders:read'] });
    });

    it('a narrowing reaches every token signed after it: a step-up (however often repeated) and a token exchange from a subject token signed before it carry no removed scope', async () => {
      const d = await signupTenant(t);
      await t.db.query(`UPDATE tenants SET tier = 'pro' WHERE id = $1`, [d.tenantId]);
      await t.tenantChanged(d.tenantId);
      const { key } = await createApiKey(t, d);
      await putScopes({ user_scopes: ['openid', 'profile', 'email', 'files:write'] }, d, d.slug).expect(200);
      const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('narrow'), password: STRONG_PASSWORD, consent: true }).expect(201);
      const scopeOf = (token: string) => String(claims(token).scope).split(' ');
      expect(scopeOf(reg.body.access_token)).toContain('files:write');
      const agent = await createAgent(t.db, d.tenantId, { scopes: ['openid', 'files:write'] });
      // the agent read its tenant's scopes before the change (cached): the change reaches it too
      expect((await postToken(t, agent, exchangeBody(reg.body.access_token)).expect(200)).body.scope).toBe('openid files:write');

      // the owner takes files:write away from the tenant's user tokens
      await putScopes({ user_scopes: ['openid', 'profile', 'email'] }, d, d.slug).expect(200);
      let token = reg.body.access_token as string;
      for (let i = 0; i < 2; i++) {
        token = (await t.http().post('/v1/auth/step-up/password').set('Authorization', `Bearer ${token}`).set('X-Forwarded-For', randomIp()).send({ password: STRONG_PASSWORD }).expect(200)).body.access_token;
        expect(scopeOf(token)).toEqual(['openid', 'profile', 'email']);
      }
      // the subject token signed before the change still says files:write: the exchange grants it no more
      const only = await postToken(t, agent, exchangeBody(reg.body.access_token, { scope: 'files:write' })).expect(400);
      expect(only.body.error).toBe('invalid_scope');
      expect((await postToken(t, agent, exchangeBody(reg.body.access_token)).expect(200)).body.scope).toBe('openid');
    });
  });
});
