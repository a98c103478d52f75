import { randomIp, TestApp, uniqueEmail } from '../../setup/app';
import { bearerPost, login, mailCode, MailWorld, post, register, RegisteredUser, sleep, startMailWorld, TenantWithKey, tenantWithKey } from './account-security.helpers';

/**
 * Wrong email codes counted per address (sign-in) and per account (step-up) over every code and
 * every client address: a new code restarts its own 5 attempts, but not this count
 * (EMAIL_CODE_FAILURES_PER_ADDRESS, default 10 per EMAIL_CODE_FAILURE_WINDOW_SECONDS).
 */
describe('account security: wrong email codes are capped per address across codes and client addresses', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;

  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t, { email_otp_enabled: true });
  }, 60_000);
  afterAll(() => w?.close());

  const request = (email: string, app: TestApp = w.t) => post(app, '/v1/auth/email-otp', tenant.apiKey, { email });
  const verify = (email: string, code: string, app: TestApp = w.t, ip = randomIp()) => post(app, '/v1/auth/email-otp/verify', tenant.apiKey, { email, code }, ip);
  const codeMail = (to: string) => w.nextMail((m) => m.to.includes(to.toLowerCase()) && m.subject.endsWith('verification code'));
  const requestCode = async (email: string, app: TestApp = w.t) => {
    await request(email, app).expect(202);
    return mailCode(await codeMail(email));
  };
  const wrong = (code: string, i = 0) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0');
  const codeRow = async (email: string) =>
    (await w.t.db.query<{ attempts: number; consumed_at: Date | null }>(
      `SELECT attempts, consumed_at FROM email_otp_codes WHERE tenant_id = $1 AND email_normalized = $2 AND purpose = 'login'`,
      [tenant.tenantId, email.toLowerCase()],
    ))[0];
  const expectThrottled = (r: { status: number; body: { code: string; status: number }; headers: Record<string, string> }, maxWait = 900) => {
    expect(r.status).toBe(429);
    expect(r.body).toMatchObject({ code: 'auth/login_throttled', status: 429 });
    expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
    const wait = Number(r.headers['retry-after']);
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(maxWait);
    expect(r.headers['x-service-docs']).toMatch(/^https?:\/\//);
  };

  it('10 wrong guesses spread over 3 codes and 10 client addresses: then 429 auth/login_throttled + Retry-After, the right code too; a blocked check evaluates nothing and voids nothing', async () => {
    const u = await register(w.t, tenant.apiKey);
    const first = await requestCode(u.email);
    for (let i = 0; i < 5; i++) expect((await verify(u.email, wrong(first, i)).expect(401)).body.code).toBe('otp/invalid');
    const second = await requestCode(u.email);
    for (let i = 0; i < 3; i++) await verify(u.email, wrong(second, i)).expect(401);
    const third = await requestCode(u.email);
    await verify(u.email, wrong(third, 0)).expect(401);
    expect(await codeRow(u.email)).toMatchObject({ attempts: 1, consumed_at: null });
    await verify(u.email, wrong(third, 1)).expect(401); // the 10th wrong code: the block starts, the live code stays
    expect(await codeRow(u.email)).toMatchObject({ attempts: 2, consumed_at: null });

    expectThrottled(await verify(u.email, wrong(third, 2)));
    expectThrottled(await verify(u.email, third));
    expect(await codeRow(u.email)).toMatchObject({ attempts: 2, consumed_at: null }); // nothing was evaluated while blocked

    // a code requested while blocked is mailed (the mail limit bounds those) but refused like any other
    const fourth = await requestCode(u.email);
    expectThrottled(await verify(u.email, fourth));
    expect(await codeRow(u.email)).toMatchObject({ attempts: 0, consumed_at: null }); // not used up by the refusal
  });

  it('a right code within the allowance still works (9 wrong over 2 codes, then the right one), and it takes its own count back', async () => {
    const u = await register(w.t, tenant.apiKey);
    const first = await requestCode(u.email);
    for (let i = 0; i < 5; i++) await verify(u.email, wrong(first, i)).expect(401);
    const second = await requestCode(u.email);
    for (let i = 0; i < 4; i++) await verify(u.email, wrong(second, i)).expect(401);
    await verify(u.email, second).expect(200);
    // 9 failures counted, the success not: one more wrong code is still judged, the next is refused
    const third = await requestCode(u.email);
    await verify(u.email, wrong(third)).expect(401);
    expectThrottled(await verify(u.email, third));
  });

  it('the block ends with its window: then the right code of a code requested during the block works', async () => {
    const low = await w.extraApp({ EMAIL_CODE_FAILURES_PER_ADDRESS: '3', EMAIL_CODE_FAILURE_WINDOW_SECONDS: '10' });
    const u = await register(w.t, tenant.apiKey);
    const first = await requestCode(u.email);
    for (let i = 0; i < 3; i++) await verify(u.email, wrong(first, i), low).expect(401);
    const code = await requestCode(u.email);
    const blocked = await verify(u.email, code, low);
    expectThrottled(blocked, 10);
    await sleep(Number(blocked.headers['retry-after']) * 1000 + 300);
    await verify(u.email, code, low).expect(200);
  });

  it('parallel wrong guesses from many addresses never get more checks than the cap (3): exactly 3 evaluated', async () => {
    const low = await w.extraApp({ EMAIL_CODE_FAILURES_PER_ADDRESS: '3' });
    const u = await register(w.t, tenant.apiKey);
    const code = await requestCode(u.email);
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => verify(u.email, wrong(code, i), low)));
    expect(results.filter((r) => r.status === 401)).toHaveLength(3);
    expect(results.filter((r) => r.status === 429 && r.body.code === 'auth/login_throttled')).toHaveLength(27);
    expect((await codeRow(u.email)).attempts).toBe(3);
    expectThrottled(await verify(u.email, code, low));
  });

  it('a right code sent in parallel with wrong ones within the cap signs in', async () => {
    const low = await w.extraApp({ EMAIL_CODE_FAILURES_PER_ADDRESS: '3' });
    for (let round = 0; round < 3; round++) {
      const u = await register(w.t, tenant.apiKey);
      const code = await requestCode(u.email);
      const results = await Promise.all([verify(u.email, wrong(code, 0), low), verify(u.email, wrong(code, 1), low), verify(u.email, code, low)]);
      expect(results.map((r) => r.status)).toEqual([401, 401, 200]);
    }
  });

  it('an unknown address answers exactly like a known one: the same statuses, bodies and Retry-After, sequentially and in parallel', async () => {
    const known = await register(w.t, tenant.apiKey);
    await requestCode(known.email); // a live code the guesses miss
    const unknown = uniqueEmail('nobody');
    await request(unknown).expect(202); // mode login: nothing is sent, no code exists
    const shape = (r: { status: number; body: Record<string, unknown>; headers: Record<string, string> }) => ({
      status: r.status,
      code: r.body.code,
      title: r.body.title,
      keys: Object.keys(r.body).sort(),
      retryAfter: r.headers['retry-after'] ? 'set' : 'unset',
    });
    const run = async (email: string) => {
      const out = [];
      for (let i = 0; i < 12; i++) out.push(shape(await verify(email, String(100000 + i))));
      return out;
    };
    const [k, n] = [await run(known.email), await run(unknown)];
    expect(n).toEqual(k);
    expect(k.map((r) => r.status)).toEqual([...Array(10).fill(401), 429, 429]);

    const parallel = async (email: string) => (await Promise.all(Array.from({ length: 25 }, (_, i) => verify(email, String(200000 + i))))).map((r) => r.status).sort();
    const [pk, pn] = [await parallel((await register(w.t, tenant.apiKey)).email), await parallel(uniqueEmail('nobody'))];
    expect(pn).toEqual(pk);
    expect(pk.filter((s) => s === 401)).toHaveLength(10);
  });

  it("an address that signed in with a code before stays open while an attacker trips the cap (the attacker's addresses do not)", async () => {
    const u = await register(w.t, tenant.apiKey);
    const home = randomIp();
    await verify(u.email, await requestCode(u.email), w.t, home).expect(200);
    const target = await requestCode(u.email);
    for (let i = 0; i < 10; i++) await verify(u.email, wrong(target, i)).expect(401);
    expectThrottled(await verify(u.email, target));
    const fresh = await requestCode(u.email);
    expectThrottled(await verify(u.email, fresh)); // from a new address
    await verify(u.email, fresh, w.t, home).expect(200);
  });

  /** A user who signed in with a code at `home`, then 9 wrong codes from 9 other addresses (one short of the cap). */
  const nineWrongAfterHome = async () => {
    const u = await register(w.t, tenant.apiKey);
    const home = randomIp();
    await verify(u.email, await requestCode(u.email), w.t, home).expect(200);
    const first = await requestCode(u.email);
    for (let i = 0; i < 5; i++) await verify(u.email, wrong(first, i)).expect(401);
    const second = await requestCode(u.email);
    for (let i = 0; i < 4; i++) await verify(u.email, wrong(second, i)).expect(401);
    return { u, home };
  };

  it("the attacker's 10th wrong guess, in parallel with the owner's right code from an address that signed in with a code before, never kills it", async () => {
    const owners = [];
    for (let round = 0; round < 6; round++) {
      const { u, home } = await nineWrongAfterHome();
      const code = await requestCode(u.email);
      const [attacker, owner] = await Promise.all([verify(u.email, wrong(code)), verify(u.email, code, w.t, home)]);
      owners.push(owner.status);
      // 429 when the owner's check, counted until it proved right, filled the allowance for a moment
      expect([401, 429]).toContain(attacker.status);
      if (attacker.status === 429) await verify(u.email, wrong(code, 1)).expect(401); // then this is the 10th
      expectThrottled(await verify(u.email, wrong(code, 2))); // the attacker's addresses are blocked now
    }
    expect(owners).toEqual(Array(6).fill(200));
  });

  it("the owner's typo during the block, from an address that signed in with a code before, leaves the code alive: the right one then signs in", async () => {
    const { u, home } = await nineWrongAfterHome();
    const code = await requestCode(u.email);
    await verify(u.email, wrong(code)).expect(401); // the attacker's 10th: the block starts
    expectThrottled(await verify(u.email, code));
    expect((await verify(u.email, wrong(code, 1), w.t, home).expect(401)).body.code).toBe('otp/invalid');
    expect(await codeRow(u.email)).toMatchObject({ attempts: 2, consumed_at: null });
    await verify(u.email, code, w.t, home).expect(200);
  });

  it('wrong codes do not block password sign-in (a realm of their own)', async () => {
    const u = await register(w.t, tenant.apiKey);
    for (let i = 0; i < 11; i++) await verify(u.email, String(300000 + i));
    expectThrottled(await verify(u.email, '000000'));
    await login(w.t, tenant.apiKey, u.email);
  });

  describe('step-up codes', () => {
    const stepUpCode = async (u: { email: string }, access: string) => {
      await bearerPost(w.t, '/v1/auth/step-up/email-otp', access, {}).expect(202);
      return mailCode(await w.nextMail((m) => m.to.includes(u.email) && m.subject.endsWith('confirmation code')));
    };
    const stepUp = (access: string, otp: string, ip = randomIp()) => bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', access, { otp }, ip);
    const stepUpRows = (u: RegisteredUser) =>
      w.t.db.query<{ attempts: number; consumed_at: Date | null }>(`SELECT attempts, consumed_at FROM email_otp_codes WHERE user_id = $1 AND purpose = 'step_up' ORDER BY created_at`, [u.id]);

    it('10 wrong codes over 3 codes, 2 sessions and 10 addresses: then 429 + Retry-After for every session of the account, the right code too; live codes stay (not voided)', async () => {
      const u = await register(w.t, tenant.apiKey);
      const other = await login(w.t, tenant.apiKey, u.email);
      const first = await stepUpCode(u, u.access);
      for (let i = 0; i < 5; i++) expect((await stepUp(u.access, wrong(first, i)).expect(401)).body.code).toBe('otp/invalid');
      const second = await stepUpCode(u, u.access);
      for (let i = 0; i < 3; i++) await stepUp(u.access, wrong(second, i)).expect(401);
      const otherCode = await stepUpCode(u, other.access);
      await stepUp(other.access, wrong(otherCode, 0)).expect(401);
      await stepUp(other.access, wrong(otherCode, 1)).expect(401); // the 10th
      expect((await stepUpRows(u)).map((r) => r.consumed_at)).toEqual([null, null]);
      expectThrottled(await stepUp(u.access, second));
      expectThrottled(await stepUp(other.access, otherCode));
      const fresh = await stepUpCode(u, u.access);
      expectThrottled(await stepUp(u.access, fresh));
      // sign-in codes of the same address are counted apart
      await post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email: u.email }).expect(202);
      const signIn = mailCode(await w.nextMail((m) => m.to.includes(u.email) && m.subject.endsWith('verification code')));
      await verify(u.email, signIn).expect(200);
    });

    it("the attacker's wrong codes (another session) never kill the owner's live code at an address that stepped up before, nor does the owner's typo there during the block", async () => {
      const u = await register(w.t, tenant.apiKey);
      const stolen = await login(w.t, tenant.apiKey, u.email);
      const home = randomIp();
      await stepUp(u.access, await stepUpCode(u, u.access), home).expect(200);
      const first = await stepUpCode(u, stolen.access);
      for (let i = 0; i < 5; i++) await stepUp(stolen.access, wrong(first, i)).expect(401);
      const own = await stepUpCode(u, u.access); // the owner's code, mailed before the block
      const second = await stepUpCode(u, stolen.access);
      for (let i = 0; i < 5; i++) await stepUp(stolen.access, wrong(second, i)).expect(401); // the 10th starts the block
      expectThrottled(await stepUp(stolen.access, second));
      expectThrottled(await stepUp(u.access, own)); // from a new address
      expect((await stepUp(u.access, wrong(own), home).expect(401)).body.code).toBe('otp/invalid');
      await stepUp(u.access, own, home).expect(200);
    });

    it('parallel wrong guesses never get more checks than the cap', async () => {
      const low = await w.extraApp({ EMAIL_CODE_FAILURES_PER_ADDRESS: '3' });
      const u = await register(w.t, tenant.apiKey);
      const code = await stepUpCode(u, u.access);
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => bearerPost(low, '/v1/auth/step-up/email-otp/verify', u.access, { otp: wrong(code, i) })));
      expect(results.filter((r) => r.status === 401)).toHaveLength(3);
      expect(results.filter((r) => r.status === 429 && r.body.code === 'auth/login_throttled')).toHaveLength(17);
      expect((await stepUpRows(u))[0].attempts).toBe(3);
    });
  });
});
