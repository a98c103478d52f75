import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createApiKey, DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { holdWrites } from '../../setup/hold-writes';

const claims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());

describe('guest sign-in (spec 2.3, 3.1, 7.2)', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
  });
  afterAll(() => t.close());

  const anon = (key = tenant.apiKey, body: object = {}, ip = randomIp()) => t.http().post('/v1/auth/anonymous').set('X-API-Key', key).set('X-Forwarded-For', ip).send(body);
  const refresh = (token: string, key = tenant.apiKey) => t.http().post('/v1/auth/refresh').set('X-API-Key', key).send({ refresh_token: token });
  const me = (token: string) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`);

  it('answers 201 with exactly the fields of spec 2.3; the JWT has is_anonymous true, aal AAL1, the default role', async () => {
    const res = await anon().expect(201);
    expect(Object.keys(res.body).sort()).toEqual(['access_token', 'expires_in', 'refresh_token', 'token_type', 'user']);
    expect(Object.keys(res.body.user).sort()).toEqual(['created_at', 'id', 'is_anonymous']);
    expect(res.body.user.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(res.body).toMatchObject({ token_type: 'Bearer', expires_in: 900, user: { is_anonymous: true } });
    expect(new Date(res.body.user.created_at).toISOString()).toBe(res.body.user.created_at);
    const c = claims(res.body.access_token);
    expect(c).toMatchObject({ sub: res.body.user.id, tenant_id: tenant.id, is_anonymous: true, aal: 'AAL1', role: 'member', amr: ['anonymous'] });
    const m = await me(res.body.access_token).expect(200);
    expect(m.body).toMatchObject({ id: res.body.user.id, email: null, is_anonymous: true, role: 'member' });
    // the guest sign-in is a sign-in (as Supabase records it for anonymous users)
    expect(m.body.last_sign_in_at).toBe(res.body.user.created_at);
  });

  it('stores public_metadata and returns it from /me; rejects a non-object, an oversized one and unknown fields', async () => {
    const res = await anon(tenant.apiKey, { public_metadata: { cart: ['sku-1'], locale: 'fr' } }).expect(201);
    expect((await me(res.body.access_token).expect(200)).body.public_metadata).toEqual({ cart: ['sku-1'], locale: 'fr' });
    for (const body of [{ public_metadata: 'x' }, { public_metadata: [1, 2] }, { public_metadata: { blob: 'x'.repeat(5000) } }, { email: 'a@b.co' }]) {
      expect((await anon(tenant.apiKey, body).expect(400)).body.code).toBe('request/invalid');
    }
  });

  it('public_metadata is kept as sent, keys named like built-in object properties included, at any depth', async () => {
    const metadata = { toString: 1, valueOf: [1], hasOwnProperty: { isPrototypeOf: true }, nested: { toString: 'a', ok: 1 }, list: [{ toLocaleString: 2, k: 3 }], x: 2 };
    const res = await anon(tenant.apiKey, { public_metadata: metadata }).expect(201);
    expect((await me(res.body.access_token).expect(200)).body.public_metadata).toEqual(metadata);
    const [row] = await t.db.query<{ public_metadata: object }>(`SELECT public_metadata FROM users WHERE id = $1`, [res.body.user.id]);
    expect(row.public_metadata).toEqual(metadata);
  });

  it('a top-level key named like a built-in object property is an unknown property (400 naming it, beside the other faults)', async () => {
    for (const key of ['toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf']) {
      const res = await anon(tenant.apiKey, { [key]: 1 }).expect(400);
      expect(res.body).toMatchObject({ code: 'request/invalid', errors: [{ field: key, message: `property ${key} is not allowed` }] });
    }
    const both = await anon(tenant.apiKey, { public_metadata: 'x', valueOf: 1 }).expect(400);
    expect(both.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['public_metadata', 'valueOf']);
  });

  it('constructor and prototype are reserved property names at any depth: 400 naming the path, never dropped unsaid', async () => {
    for (const [body, field] of [
      [{ constructor: 1 }, 'constructor'],
      [{ public_metadata: { constructor: 'c' } }, 'public_metadata.constructor'],
      [{ public_metadata: { a: { prototype: { x: 1 } } } }, 'public_metadata.a.prototype'],
    ] as const) {
      const res = await anon(tenant.apiKey, body).expect(400);
      expect(res.body).toMatchObject({ code: 'request/invalid', errors: [{ field }] });
    }
  });

  it('needs a valid API key', async () => {
    expect((await t.http().post('/v1/auth/anonymous').set('X-Forwarded-For', randomIp()).send({}).expect(401)).body.code).toBe('auth/invalid_api_key');
    expect((await anon('authp_nope').expect(401)).body.code).toBe('auth/invalid_api_key');
  });

  it('inherits the tenant default_user_role', async () => {
    const ro = await createTenant(t.db, { anonymous_signins_enabled: true, default_user_role: 'read_only' });
    const res = await anon(ro.apiKey).expect(201);
    expect(claims(res.body.access_token).role).toBe('read_only');
  });

  it('a guest holds the tenant default role of the day until registration (spec 5 rule 5): refresh, /me and the claim follow a change', async () => {
    const ten = await createTenant(t.db, { anonymous_signins_enabled: true, default_user_role: 'admin' });
    const g = await anon(ten.apiKey).expect(201);
    expect(claims(g.body.access_token).role).toBe('admin');
    await t.db.query(`UPDATE tenants SET default_user_role = 'read_only' WHERE id = $1`, [ten.id]);
    await t.tenantChanged(ten.id);
    const r = await refresh(g.body.refresh_token, ten.apiKey).expect(200);
    expect(claims(r.body.access_token)).toMatchObject({ role: 'read_only', is_anonymous: true });
    expect((await me(r.body.access_token).expect(200)).body.role).toBe('read_only');
    // a registered user keeps the role it registered with; the claim gives the default of that day
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', ten.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201);
    const claimed = await t
      .http()
      .post('/v1/auth/register')
      .set('X-API-Key', ten.apiKey)
      .set('X-Forwarded-For', randomIp())
      .set('Authorization', `Bearer ${r.body.access_token}`)
      .send({ email: uniqueEmail('claim'), password: STRONG_PASSWORD, consent: true })
      .expect(201);
    expect(claims(claimed.body.access_token)).toMatchObject({ sub: g.body.user.id, role: 'read_only', is_anonymous: false });
    await t.db.query(`UPDATE tenants SET default_user_role = 'member' WHERE id = $1`, [ten.id]);
    await t.tenantChanged(ten.id);
    const after = await refresh(claimed.body.refresh_token, ten.apiKey).expect(200);
    expect(claims(after.body.access_token).role).toBe('read_only');
    expect(claims((await refresh(reg.body.refresh_token, ten.apiKey).expect(200)).body.access_token).role).toBe('read_only');
  });

  it('refresh keeps is_anonymous true across rotation and updates last_active_at (at most once a minute)', async () => {
    const g = await anon().expect(201);
    await t.db.query(`UPDATE users SET last_active_at = now() - interval '10 days' WHERE id = $1`, [g.body.user.id]);
    const r1 = await refresh(g.body.refresh_token).expect(200);
    expect(claims(r1.body.access_token).is_anonymous).toBe(true);
    expect(r1.body.user).toMatchObject({ id: g.body.user.id, is_anonymous: true, email: null });
    const r2 = await refresh(r1.body.refresh_token).expect(200);
    expect(claims(r2.body.access_token)).toMatchObject({ is_anonymous: true, aal: 'AAL1' });
    const [row] = await t.db.query<{ age: number }>(`SELECT extract(epoch FROM now() - last_active_at) AS age FROM users WHERE id = $1`, [g.body.user.id]);
    expect(Number(row.age)).toBeLessThan(60);
    await t.db.query(`UPDATE users SET last_active_at = now() - interval '5 minutes' WHERE id = $1`, [g.body.user.id]);
    await me(r2.body.access_token).expect(200);
    const [row2] = await t.db.query<{ age: number }>(`SELECT extract(epoch FROM now() - last_active_at) AS age FROM users WHERE id = $1`, [g.body.user.id]);
    expect(Number(row2.age)).toBeLessThan(60);
  });

  it('403 anonymous/disabled when the tenant has guests off; disabling stops new guests only', async () => {
    const off = await createTenant(t.db, { anonymous_signins_enabled: false });
    expect((await anon(off.apiKey).expect(403)).body.code).toBe('anonymous/disabled');
    const on = await createTenant(t.db, { anonymous_signins_enabled: true });
    const g = await anon(on.apiKey).expect(201);
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = false WHERE id = $1`, [on.id]);
    await t.tenantChanged(on.id);
    expect((await anon(on.apiKey).expect(403)).body.code).toBe('anonymous/disabled');
    const r = await refresh(g.body.refresh_token, on.apiKey).expect(200);
    await me(r.body.access_token).expect(200);
  });

  it('once the API key that created a guest is revoked, its access token works until exp but refresh (and a claim into a lasting session) fails', async () => {
    const owner = await signupTenant(t);
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true WHERE slug = $1`, [owner.slug]);
    await t.tenantChanged(owner.tenantId);
    const k = await createApiKey(t, owner);
    const g = await anon(k.key).expect(201);
    await t.http().delete(`/v1/auth/dashboard/tenants/${owner.slug}/api-keys/${k.id}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).expect(200);
    await me(g.body.access_token).expect(200);
    const k2 = await createApiKey(t, owner);
    expect((await refresh(g.body.refresh_token, k2.key).expect(401)).body.code).toBe('auth/invalid_refresh_token');
    // a claim would turn the dying session into a lasting one: refused, the guest untouched
    const email = uniqueEmail('revoked-key');
    const claim = await t.http().post('/v1/auth/register').set('X-API-Key', k2.key).set('X-Forwarded-For', randomIp())
      .set('Authorization', `Bearer ${g.body.access_token}`).send({ email, password: STRONG_PASSWORD, consent: true }).expect(401);
    expect(claim.body.code).toBe('auth/invalid_token');
    expect(claim.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    const [u] = await t.db.query<{ is_anonymous: boolean; email: string | null }>(`SELECT is_anonymous, email FROM users WHERE id = $1`, [g.body.user.id]);
    expect(u).toEqual({ is_anonymous: true, email: null });
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.claimed' AND target_id = $1`, [g.body.user.id])).toHaveLength(0);
    await me(g.body.access_token).expect(200);
    // registering without the guest token works (a new account)
    const fresh = await t.http().post('/v1/auth/register').set('X-API-Key', k2.key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    expect(fresh.body.user.id).not.toBe(g.body.user.id);
  });

  it('a rotated guest token replayed after its creating API key was revoked is still reuse: the session ends, the tokens issued since stop working', async () => {
    const owner = await signupTenant(t);
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true WHERE slug = $1`, [owner.slug]);
    await t.tenantChanged(owner.tenantId);
    const k = await createApiKey(t, owner);
    const k2 = await createApiKey(t, owner);
    const g = await anon(k.key).expect(201);
    const child = await refresh(g.body.refresh_token, k.key).expect(200);
    await t.http().delete(`/v1/auth/dashboard/tenants/${owner.slug}/api-keys/${k.id}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).expect(200);
    await me(child.body.access_token).expect(200);
    // within the grace period: refused (the key is revoked), the session goes on
    expect((await refresh(g.body.refresh_token, k2.key).expect(401)).body.detail ?? '').not.toMatch(/reuse/);
    await me(child.body.access_token).expect(200);
    await t.db.query(`UPDATE refresh_tokens SET rotated_at = now() - interval '1 minute' WHERE id = $1`, [g.body.refresh_token.split(':')[0]]);
    expect((await refresh(g.body.refresh_token, k2.key).expect(401)).body.detail).toMatch(/reuse detected/);
    await me(child.body.access_token).expect(401);
    const sid = claims(g.body.access_token).sid;
    expect(await t.db.query(`SELECT 1 FROM user_sessions WHERE id = $1 AND revoked_reason = 'refresh_token_reuse'`, [sid])).toHaveLength(1);
  });

  describe('claim by register with the guest bearer (ClaimGuest)', () => {
    const register = (bearer: string, email: string, key = tenant.apiKey) =>
      t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).set('Authorization', `Bearer ${bearer}`).send({ email, password: STRONG_PASSWORD, consent: true });

    it('keeps the user id and session, sets email and password, retires the guest refresh token, one audit and one outbox event', async () => {
      const g = await anon(tenant.apiKey, { public_metadata: { cart: [1] } }).expect(201);
      const email = uniqueEmail('claim');
      const res = await register(g.body.access_token, email).expect(201);
      expect(res.body.user).toMatchObject({ id: g.body.user.id, email, is_anonymous: false });
      const c = claims(res.body.access_token);
      expect(c).toMatchObject({ sub: g.body.user.id, is_anonymous: false, amr: ['pwd'] });
      expect(c.sid).toBe(claims(g.body.access_token).sid);
      expect((await me(res.body.access_token).expect(200)).body).toMatchObject({ id: g.body.user.id, email, is_anonymous: false, public_metadata: { cart: [1] } });
      expect((await refresh(g.body.refresh_token).expect(401)).body.code).toBe('auth/invalid_refresh_token');
      await refresh(res.body.refresh_token).expect(200);
      await t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).expect(200);
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.claimed' AND target_id = $1`, [g.body.user.id])).toHaveLength(1);
      expect(await t.db.query(`SELECT 1 FROM outbox WHERE event_type = 'user.claimed' AND payload->>'user_id' = $1`, [g.body.user.id])).toHaveLength(1);
      // like any registration, the claimed address gets its verification mail
      expect(await t.db.query(`SELECT 1 FROM outbox WHERE topic = 'email' AND payload->>'template' = 'email_verification' AND payload->>'to' = $1`, [email])).toHaveLength(1);
    });

    it('needs X-API-Key beside the bearer (contract "Tenant resolution": register takes its tenant from the key); refused, the guest stays a guest', async () => {
      const g = await anon().expect(201);
      const alone = await t.http().post('/v1/auth/register').set('Authorization', `Bearer ${g.body.access_token}`).set('X-Forwarded-For', randomIp())
        .send({ email: uniqueEmail('nokey'), password: STRONG_PASSWORD, consent: true }).expect(401);
      expect(alone.body.code).toBe('auth/invalid_api_key');
      const [u] = await t.db.query<{ is_anonymous: boolean; email: string | null }>(`SELECT is_anonymous, email FROM users WHERE id = $1`, [g.body.user.id]);
      expect(u).toEqual({ is_anonymous: true, email: null });
      expect((await register(g.body.access_token, uniqueEmail('withkey')).expect(201)).body.user.id).toBe(g.body.user.id);
    });

    // contract "Tokens": a refresh token that was rotated, presented again, ends the session. A
    // token the claim retired was never rotated: refused at any time, the claimed session goes on
    describe.each([
      ['the token live at the claim (retired by it)', 2, false],
      ['a token rotated before the claim', 0, true],
    ])('after a claim, %s presented again', (_title, which, endsSession) => {
      it(`within the grace: 401 and the session goes on; after it: ${endsSession ? 'reuse, the session ends' : '401 again, the session still goes on'}`, async () => {
        const g = await anon().expect(201);
        const r1 = await refresh(g.body.refresh_token).expect(200);
        const r2 = await refresh(r1.body.refresh_token).expect(200);
        const chain = [g.body.refresh_token, r1.body.refresh_token, r2.body.refresh_token] as string[];
        const claimed = await register(r2.body.access_token, uniqueEmail('reuse')).expect(201);
        const old = chain[which as number];
        if (which === 2) expect((await refresh(old).expect(401)).body.code).toBe('auth/invalid_refresh_token');
        const next = await refresh(claimed.body.refresh_token).expect(200);
        // the grace is over (back-dated: the chain's rotations and the claim's retirement)
        const sid = claims(g.body.access_token).sid as string;
        await t.db.query(
          `UPDATE refresh_tokens SET rotated_at = rotated_at - interval '1 minute', revoked_at = revoked_at - interval '1 minute' WHERE session_id = $1 AND id = ANY($2::uuid[])`,
          [sid, chain.map((c) => c.split(':')[0])],
        );
        const again = await refresh(old).expect(401);
        expect(again.body.code).toBe('auth/invalid_refresh_token');
        const [session] = await t.db.query<{ revoked_reason: string | null }>(`SELECT revoked_reason FROM user_sessions WHERE id = $1`, [sid]);
        if (endsSession) {
          expect(session.revoked_reason).toBe('refresh_token_reuse');
          await refresh(next.body.refresh_token).expect(401);
          await me(next.body.access_token).expect(401);
        } else {
          expect(session.revoked_reason).toBeNull();
          // nor does signing out with it (RFC 7009: a token that is no longer one has no effect)
          await t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: old, token_type_hint: 'refresh_token' }).expect(200);
          expect((await t.db.query<{ revoked_reason: string | null }>(`SELECT revoked_reason FROM user_sessions WHERE id = $1`, [sid]))[0].revoked_reason).toBeNull();
          await me(next.body.access_token).expect(200);
          await refresh(next.body.refresh_token).expect(200);
        }
      });
    });

    it('two parallel claims of one guest: exactly one wins, the other 409, nothing half-written', async () => {
      const g = await anon().expect(201);
      const results = await Promise.all([register(g.body.access_token, uniqueEmail('a')), register(g.body.access_token, uniqueEmail('b')), register(g.body.access_token, uniqueEmail('c'))]);
      const codes = results.map((r) => r.status).sort();
      expect(codes).toEqual([201, 409, 409]);
      for (const r of results.filter((x) => x.status === 409)) expect(r.body.code).toBe('anonymous/already_claimed');
      const winner = results.find((r) => r.status === 201)!;
      const [row] = await t.db.query<{ email: string; is_anonymous: boolean }>(`SELECT email, is_anonymous FROM users WHERE id = $1`, [g.body.user.id]);
      expect(row).toEqual({ email: winner.body.user.email, is_anonymous: false });
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.claimed' AND target_id = $1`, [g.body.user.id])).toHaveLength(1);
      expect(await t.db.query(`SELECT 1 FROM outbox WHERE event_type = 'user.claimed' AND payload->>'user_id' = $1`, [g.body.user.id])).toHaveLength(1);
    });

    // A refresh of the guest token racing the claim must not leave the session a second live refresh
    // chain. A trigger scoped to this one session slows its refresh-token inserts, so the refresh
    // (or the claim) is held inside its transaction while the other arrives: both orders, every time.
    describe.each([
      ['the refresh starts first and is still committing when the claim arrives', 'refresh'],
      ['the claim starts first and is still committing when the refresh arrives', 'claim'],
    ])('a guest refresh racing the claim: %s', (_title, first) => {
      it('leaves exactly one live refresh token, the claim\'s; a token the refresh handed out no longer works, and never ends the claimed session', async () => {
        const g = await anon().expect(201);
        const sid = claims(g.body.access_token).sid as string;
        const release = await holdWrites(t.db, 'refresh_tokens', 'INSERT', `NEW.session_id = '${sid}'`, 0.4);
        try {
          const doRefresh = () => refresh(g.body.refresh_token).then((r) => r);
          const doClaim = () => register(g.body.access_token, uniqueEmail('race')).then((r) => r);
          const pause = () => new Promise((r) => setTimeout(r, 150));
          const [ref, claim] =
            first === 'refresh'
              ? await Promise.all([doRefresh(), pause().then(doClaim)])
              : await Promise.all([pause().then(doRefresh), doClaim()]).then(([r, c]) => [r, c] as const);
          expect(claim.status).toBe(201);
          expect([200, 401]).toContain(ref.status);
          // whatever the refresh answered, its token (if any) is dead now and the claim's works
          if (ref.status === 200) expect((await refresh(ref.body.refresh_token).expect(401)).body.code).toBe('auth/invalid_refresh_token');
          const live = await t.db.query<{ id: string }>(`SELECT id FROM refresh_tokens WHERE session_id = $1 AND revoked_at IS NULL AND rotated_at IS NULL`, [sid]);
          expect(live.map((r) => r.id)).toEqual([claim.body.refresh_token.split(':')[0]]);
          // past the grace, the token the claim retired (the refresh's child when the refresh went
          // first, else the guest's own) was never rotated: refused again, the claimed session goes on
          await t.db.query(`UPDATE refresh_tokens SET rotated_at = rotated_at - interval '1 minute', revoked_at = revoked_at - interval '1 minute' WHERE session_id = $1 AND id <> $2`, [
            sid,
            claim.body.refresh_token.split(':')[0],
          ]);
          const retired = ref.status === 200 ? (ref.body.refresh_token as string) : (g.body.refresh_token as string);
          expect((await refresh(retired).expect(401)).body.code).toBe('auth/invalid_refresh_token');
          expect((await t.db.query<{ revoked_reason: string | null }>(`SELECT revoked_reason FROM user_sessions WHERE id = $1`, [sid]))[0].revoked_reason).toBeNull();
          await me(claim.body.access_token).expect(200);
          await refresh(claim.body.refresh_token).expect(200);
        } finally {
          await release();
        }
      });
    });

    it('a claim whose session ends (logout) after its bearer check is 401, and opens no new session', async () => {
      const g = await anon().expect(201);
      const sid = claims(g.body.access_token).sid as string;
      // the logout commits while the claim waits for the session: the claim must not carry on
      const outcome = await t.db.tx(async (tx) => {
        await tx.query(`SELECT 1 FROM user_sessions WHERE id = $1 FOR UPDATE`, [sid]);
        const claim = register(g.body.access_token, uniqueEmail('ended')).then((r) => r);
        await new Promise((r) => setTimeout(r, 200));
        await tx.query(`UPDATE user_sessions SET revoked_at = now(), revoked_reason = 'logout' WHERE id = $1`, [sid]);
        return { claim }; // not the promise itself: the transaction must commit before it is awaited
      });
      const res = await outcome.claim;
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('auth/invalid_token');
      expect(await t.db.query(`SELECT 1 FROM user_sessions WHERE user_id = $1 AND revoked_at IS NULL`, [g.body.user.id])).toHaveLength(0);
      expect(await t.db.query(`SELECT 1 FROM users WHERE id = $1 AND is_anonymous`, [g.body.user.id])).toHaveLength(1);
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.claimed' AND target_id = $1`, [g.body.user.id])).toHaveLength(0);
    });

    it('a claim is a sign-in of the month: a guest last active in an earlier month is counted in this one, once', async () => {
      const x = await createTenant(t.db, { anonymous_signins_enabled: true });
      const g = await anon(x.apiKey).expect(201);
      // the guest was counted in an earlier month and not seen since
      await t.db.query(`UPDATE users SET mau_month = '2000-01-01', last_active_at = now() - interval '40 days', last_sign_in_at = now() - interval '40 days' WHERE id = $1`, [g.body.user.id]);
      await t.db.query(`UPDATE tenant_mau SET month = '2000-01-01' WHERE tenant_id = $1`, [x.id]);
      await register(g.body.access_token, uniqueEmail('mau'), x.apiKey).expect(201);
      const month = await t.db.query<{ active_users: number }>(`SELECT active_users FROM tenant_mau WHERE tenant_id = $1 AND month = date_trunc('month', now() AT TIME ZONE 'UTC')::date`, [x.id]);
      expect(month).toEqual([{ active_users: 1 }]);
      const [u] = await t.db.query<{ recent: boolean }>(
        `SELECT mau_month = date_trunc('month', now() AT TIME ZONE 'UTC')::date AND last_sign_in_at > now() - interval '1 minute' AND last_active_at > now() - interval '1 minute' AS recent FROM users WHERE id = $1`,
        [g.body.user.id],
      );
      expect(u.recent).toBe(true);
    });

    it("an email another user of the tenant has: 409 user/email_exists, the guest and its data untouched", async () => {
      const email = uniqueEmail('taken');
      await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
      const g = await anon(tenant.apiKey, { public_metadata: { keep: true } }).expect(201);
      const res = await register(g.body.access_token, email.toUpperCase()).expect(409);
      expect(res.body.code).toBe('user/email_exists');
      const [row] = await t.db.query<{ is_anonymous: boolean; email: string | null; public_metadata: object }>(`SELECT is_anonymous, email, public_metadata FROM users WHERE id = $1`, [g.body.user.id]);
      expect(row).toEqual({ is_anonymous: true, email: null, public_metadata: { keep: true } });
      const r = await refresh(g.body.refresh_token).expect(200);
      expect(claims(r.body.access_token).is_anonymous).toBe(true);
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.claimed' AND target_id = $1`, [g.body.user.id])).toHaveLength(0);
    });

    it('a guest already claimed: 409 anonymous/already_claimed (even with its old guest token)', async () => {
      const g = await anon().expect(201);
      await register(g.body.access_token, uniqueEmail()).expect(201);
      expect((await register(g.body.access_token, uniqueEmail()).expect(409)).body.code).toBe('anonymous/already_claimed');
    });

    it("a guest token of another tenant with this tenant's key: 401 tenant mismatch", async () => {
      const other = await createTenant(t.db, { anonymous_signins_enabled: true });
      const g = await anon(other.apiKey).expect(201);
      const mismatch = await register(g.body.access_token, uniqueEmail()).expect(401);
      expect(mismatch.body.code).toBe('auth/tenant_mismatch');
      expect(mismatch.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    });
  });

  describe('monthly active users', () => {
    it('refuses new guests beyond the tier allowance (free 10,000) with anonymous/mau_exhausted; pro has more, enterprise none', async () => {
      const free = await createTenant(t.db, { anonymous_signins_enabled: true, tier: 'free' });
      await anon(free.apiKey).expect(201);
      await t.db.query(`UPDATE tenant_mau SET active_users = 10000 WHERE tenant_id = $1`, [free.id]);
      expect((await anon(free.apiKey).expect(403)).body.code).toBe('anonymous/mau_exhausted');
      const pro = await createTenant(t.db, { anonymous_signins_enabled: true, tier: 'pro' });
      await anon(pro.apiKey).expect(201);
      await t.db.query(`UPDATE tenant_mau SET active_users = 10000 WHERE tenant_id = $1`, [pro.id]);
      await anon(pro.apiKey).expect(201);
      await t.db.query(`UPDATE tenant_mau SET active_users = 100000 WHERE tenant_id = $1`, [pro.id]);
      expect((await anon(pro.apiKey).expect(403)).body.code).toBe('anonymous/mau_exhausted');
      const ent = await createTenant(t.db, { anonymous_signins_enabled: true, tier: 'enterprise' });
      await anon(ent.apiKey).expect(201);
      await t.db.query(`UPDATE tenant_mau SET active_users = 5000000 WHERE tenant_id = $1`, [ent.id]);
      await anon(ent.apiKey).expect(201);
    });

    it('counts exactly: parallel guests each count once, a user active again in the month is not counted twice', async () => {
      const x = await createTenant(t.db, { anonymous_signins_enabled: true });
      const guests = await Promise.all(Array.from({ length: 12 }, () => anon(x.apiKey)));
      for (const g of guests) expect(g.status).toBe(201);
      const reg = await t.http().post('/v1/auth/register').set('X-API-Key', x.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201);
      await Promise.all([refresh(guests[0].body.refresh_token, x.apiKey), me(guests[1].body.access_token), refresh(reg.body.refresh_token, x.apiKey)]);
      const [m] = await t.db.query<{ active_users: number }>(`SELECT active_users FROM tenant_mau WHERE tenant_id = $1`, [x.id]);
      expect(m.active_users).toBe(13);
      // a guest is counted by its creation, which stamps the month on the user row: active again
      // (past the once-a-minute window), it is not counted twice, and no per-user row was needed
      await t.db.query(`UPDATE users SET last_active_at = now() - interval '2 minutes' WHERE id = $1`, [guests[3].body.user.id]);
      await Promise.all([me(guests[3].body.access_token), refresh(guests[3].body.refresh_token, x.apiKey)]);
      const [{ n: rows }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tenant_mau_users WHERE user_id = $1`, [guests[3].body.user.id]);
      expect(rows).toBe(0);
      const [m1] = await t.db.query<{ active_users: number }>(`SELECT active_users FROM tenant_mau WHERE tenant_id = $1`, [x.id]);
      expect(m1.active_users).toBe(13);
      // a user last active in an earlier month counts again in this one, once, even when its first
      // requests of the month run in parallel
      await t.db.query(`UPDATE users SET mau_month = '2000-01-01', last_active_at = now() - interval '2 minutes' WHERE id = $1`, [guests[2].body.user.id]);
      await Promise.all([me(guests[2].body.access_token), me(guests[2].body.access_token), me(guests[2].body.access_token)]);
      const [m2] = await t.db.query<{ active_users: number }>(`SELECT active_users FROM tenant_mau WHERE tenant_id = $1`, [x.id]);
      expect(m2.active_users).toBe(14);
      await Promise.all([me(guests[2].body.access_token), me(guests[2].body.access_token)]);
      const [m3] = await t.db.query<{ active_users: number }>(`SELECT active_users FROM tenant_mau WHERE tenant_id = $1`, [x.id]);
      expect(m3.active_users).toBe(14);
    });
  });
});

describe('guest limits (spec 8)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_ANONYMOUS_PER_KEY_PER_HOUR: '4' });
  });
  afterAll(() => t.close());

  it('5 per minute per client address: 429 anonymous/rate_limited with Retry-After and X-Service-Docs', async () => {
    const a = await createTenant(t.db, { anonymous_signins_enabled: true });
    const b = await createTenant(t.db, { anonymous_signins_enabled: true });
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await t.http().post('/v1/auth/anonymous').set('X-API-Key', i % 2 ? a.apiKey : b.apiKey).set('X-Forwarded-For', ip).send({}).expect(201);
    const res = await t.http().post('/v1/auth/anonymous').set('X-API-Key', a.apiKey).set('X-Forwarded-For', ip).send({}).expect(429);
    expect(res.body.code).toBe('anonymous/rate_limited');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(res.headers['x-service-docs']).toMatch(/^http/);
  });

  it('per API key per hour (configured to 4 here; 1000 by default): 429 anonymous/rate_limited from any address', async () => {
    const a = await createTenant(t.db, { anonymous_signins_enabled: true });
    for (let i = 0; i < 4; i++) await t.http().post('/v1/auth/anonymous').set('X-API-Key', a.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    const res = await t.http().post('/v1/auth/anonymous').set('X-API-Key', a.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(429);
    expect(res.body.code).toBe('anonymous/rate_limited');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(60);
    expect(res.headers['x-service-docs']).toBeTruthy();
    // another key of another tenant is unaffected
    const b = await createTenant(t.db, { anonymous_signins_enabled: true });
    await t.http().post('/v1/auth/anonymous').set('X-API-Key', b.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
  });
});

describe('guest limits: the per-key allowance counts only requests the address limit let through, with a valid body', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_ANONYMOUS_PER_KEY_PER_HOUR: '6' });
  });
  afterAll(() => t.close());
  const anon = (key: string, ip: string, body: object = {}) => t.http().post('/v1/auth/anonymous').set('X-API-Key', key).set('X-Forwarded-For', ip).send(body);

  it('requests refused by the per-address limit do not use up the key: one address cannot lock the other guests out', async () => {
    const a = await createTenant(t.db, { anonymous_signins_enabled: true });
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await anon(a.apiKey, ip).expect(201);
    for (let i = 0; i < 30; i++) expect((await anon(a.apiKey, ip).expect(429)).body.code).toBe('anonymous/rate_limited');
    // the key counted 5 of its 6: another address still gets a guest, then the key's limit holds
    await anon(a.apiKey, randomIp()).expect(201);
    const res = await anon(a.apiKey, randomIp()).expect(429);
    expect(res.body.code).toBe('anonymous/rate_limited');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(60);
  });

  it('requests refused for an invalid body do not count against the key (they do against the address)', async () => {
    const a = await createTenant(t.db, { anonymous_signins_enabled: true });
    for (let i = 0; i < 10; i++) expect((await anon(a.apiKey, randomIp(), { public_metadata: 'x' }).expect(400)).body.code).toBe('request/invalid');
    for (let i = 0; i < 6; i++) await anon(a.apiKey, randomIp()).expect(201);
    await anon(a.apiKey, randomIp()).expect(429);
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await anon(a.apiKey, ip, { nope: 1 }).expect(400);
    expect((await anon(a.apiKey, ip, { nope: 1 }).expect(429)).body.code).toBe('anonymous/rate_limited');
  });
});

describe('tenant anonymous settings (contract "Tenant settings")', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  /** PATCH of the tenant's guest settings as its owner, with X-Service-Confirm when given. */
  const settingsPatch = (o: DashboardFixture) => (body: object, confirm?: string) => {
    const r = t.http().patch(`/v1/auth/dashboard/tenants/${o.slug}/settings/anonymous`).set('Cookie', o.cookie).set('X-CSRF-Token', o.csrf);
    if (confirm) r.set('X-Service-Confirm', confirm);
    return r.send(body);
  };

  it('GET defaults; first enabling with a role broader than read_only needs X-Service-Confirm', async () => {
    const o = await signupTenant(t);
    const url = `/v1/auth/dashboard/tenants/${o.slug}/settings/anonymous`;
    expect((await t.http().get(url).set('Cookie', o.cookie).expect(200)).body).toEqual({ anonymous_signins_enabled: false, anonymous_user_ttl_days: 30, default_user_role: 'member' });
    const patch = settingsPatch(o);
    expect((await patch({ anonymous_signins_enabled: true }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    expect((await patch({ anonymous_signins_enabled: true }, 'yes').expect(409)).body.code).toBe('anonymous/confirmation_required');
    const ok = await patch({ anonymous_signins_enabled: true, anonymous_user_ttl_days: 7 }, 'privileged-default-role').expect(200);
    expect(ok.body).toEqual({ anonymous_signins_enabled: true, anonymous_user_ttl_days: 7, default_user_role: 'member' });
    // not the first time any more: re-enabling with the role confirmed before needs nothing
    await patch({ anonymous_signins_enabled: false }).expect(200);
    await patch({ anonymous_signins_enabled: true }).expect(200);
    // re-enabling with a broader role than was ever confirmed does
    await patch({ anonymous_signins_enabled: false }).expect(200);
    expect((await patch({ anonymous_signins_enabled: true, default_user_role: 'admin' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    await patch({ anonymous_signins_enabled: true, default_user_role: 'admin' }, 'privileged-default-role').expect(200);
    const audits = await t.db.query<{ metadata: { confirmed_privileged_role: boolean } }>(
      `SELECT metadata FROM audit_events WHERE type = 'tenant.anonymous_settings_updated' AND tenant_id = $1 ORDER BY created_at, id`,
      [o.tenantId],
    );
    expect(audits.map((a) => a.metadata.confirmed_privileged_role)).toEqual([true, false, false, false, true]);
  });

  it('parallel changes are made one after the other: the newest audit row is the change that holds, and each one starts from the one before', async () => {
    const o = await signupTenant(t);
    const patch = settingsPatch(o);
    await patch({ anonymous_signins_enabled: true, default_user_role: 'read_only' }).expect(200);
    const ttls = Array.from({ length: 12 }, (_, i) => i + 2);
    const answers = await Promise.all(ttls.map((d) => patch({ anonymous_user_ttl_days: d })));
    expect(answers.map((a) => a.status)).toEqual(ttls.map(() => 200));
    const [now] = await t.db.query<{ anonymous_user_ttl_days: number }>(`SELECT anonymous_user_ttl_days FROM tenants WHERE id = $1`, [o.tenantId]);
    const trail = await t.db.query<{ metadata: { before: { anonymous_user_ttl_days: number }; after: { anonymous_user_ttl_days: number } } }>(
      `SELECT metadata FROM audit_events WHERE type = 'tenant.anonymous_settings_updated' AND tenant_id = $1 ORDER BY created_at DESC, id DESC`,
      [o.tenantId],
    );
    expect(trail[0].metadata.after.anonymous_user_ttl_days).toBe(now.anonymous_user_ttl_days);
    // newest first: each change's before is the after of the one stamped just before it
    for (let i = 0; i + 1 < trail.length; i++) expect(trail[i].metadata.before.anonymous_user_ttl_days).toBe(trail[i + 1].metadata.after.anonymous_user_ttl_days);
  });

  it('widening the role while guests are enabled needs the confirmation too (no two-step bypass); narrowing does not', async () => {
    const o = await signupTenant(t);
    const { key } = await createApiKey(t, o);
    const url = `/v1/auth/dashboard/tenants/${o.slug}/settings/anonymous`;
    const patch = settingsPatch(o);
    expect((await patch({ anonymous_signins_enabled: true, default_user_role: 'admin' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    await patch({ anonymous_signins_enabled: true, default_user_role: 'read_only' }).expect(200);
    expect((await patch({ default_user_role: 'admin' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    expect((await patch({ default_user_role: 'member' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    expect(claims(g.body.access_token).role).toBe('read_only');
    await patch({ default_user_role: 'member' }, 'privileged-default-role').expect(200);
    // member confirmed; admin still needs its own confirmation, even after a detour through disabled:
    // existing guests keep refreshing while sign-ins are off, with the tenant's current role
    expect((await patch({ default_user_role: 'admin' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    await patch({ anonymous_signins_enabled: false }).expect(200);
    expect((await patch({ default_user_role: 'admin' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    const refreshed = await t.http().post('/v1/auth/refresh').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ refresh_token: g.body.refresh_token }).expect(200);
    expect(claims(refreshed.body.access_token).role).toBe('member');
    // re-enabling with the role guests already have needs nothing
    await patch({ anonymous_signins_enabled: true }).expect(200);
    // narrowing and unrelated fields need nothing
    await patch({ default_user_role: 'read_only', anonymous_user_ttl_days: 9 }).expect(200);
    // widening back while enabled: confirmed again
    expect((await patch({ default_user_role: 'member' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    expect((await t.http().get(url).set('Cookie', o.cookie).expect(200)).body).toEqual({ anonymous_signins_enabled: true, anonymous_user_ttl_days: 9, default_user_role: 'read_only' });
  });

  it('guests that exist get no privileged role while sign-ins are off without the confirmation (review: disable + admin in one change)', async () => {
    const o = await signupTenant(t);
    const { key } = await createApiKey(t, o);
    const patch = settingsPatch(o);
    await patch({ anonymous_signins_enabled: true, default_user_role: 'read_only' }).expect(200);
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    expect((await patch({ anonymous_signins_enabled: false, default_user_role: 'admin' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    await patch({ anonymous_signins_enabled: false }).expect(200);
    expect((await patch({ default_user_role: 'admin' }).expect(409)).body.code).toBe('anonymous/confirmation_required');
    const r1 = await t.http().post('/v1/auth/refresh').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ refresh_token: g.body.refresh_token }).expect(200);
    expect(claims(r1.body.access_token).role).toBe('read_only');
    // confirmed: the existing guest gets it on its next refresh, and the audit says it was confirmed
    await patch({ default_user_role: 'admin' }, 'privileged-default-role').expect(200);
    const r2 = await t.http().post('/v1/auth/refresh').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ refresh_token: r1.body.refresh_token }).expect(200);
    expect(claims(r2.body.access_token).role).toBe('admin');
    const audits = await t.db.query<{ metadata: { confirmed_privileged_role: boolean } }>(
      `SELECT metadata FROM audit_events WHERE type = 'tenant.anonymous_settings_updated' AND tenant_id = $1 ORDER BY created_at, id`,
      [o.tenantId],
    );
    expect(audits.map((a) => a.metadata.confirmed_privileged_role)).toEqual([false, false, true]);
    // the same settings again (or an empty PATCH) change nothing: 200 with them, no audit event
    for (const same of [{}, { anonymous_signins_enabled: false, default_user_role: 'admin' }])
      expect((await patch(same).expect(200)).body).toMatchObject({ anonymous_signins_enabled: false, default_user_role: 'admin' });
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'tenant.anonymous_settings_updated' AND tenant_id = $1`, [o.tenantId])).toHaveLength(3);
  });

  it('a tenant that never enabled guests changes its default role freely (no guest can get it)', async () => {
    const o = await signupTenant(t);
    const url = `/v1/auth/dashboard/tenants/${o.slug}/settings/anonymous`;
    await t.http().patch(url).set('Cookie', o.cookie).set('X-CSRF-Token', o.csrf).send({ default_user_role: 'admin' }).expect(200);
    expect((await t.http().patch(url).set('Cookie', o.cookie).set('X-CSRF-Token', o.csrf).send({ anonymous_signins_enabled: true }).expect(409)).body.code).toBe('anonymous/confirmation_required');
  });

  it('enabling with read_only needs no confirmation', async () => {
    const o = await signupTenant(t);
    const url = `/v1/auth/dashboard/tenants/${o.slug}/settings/anonymous`;
    const res = await t.http().patch(url).set('Cookie', o.cookie).set('X-CSRF-Token', o.csrf).send({ anonymous_signins_enabled: true, default_user_role: 'read_only' }).expect(200);
    expect(res.body.default_user_role).toBe('read_only');
  });

  it.each([
    [{ anonymous_user_ttl_days: 0 }],
    [{ anonymous_user_ttl_days: 181 }],
    [{ anonymous_user_ttl_days: 1.5 }],
    [{ anonymous_user_ttl_days: '30' }],
    [{ anonymous_signins_enabled: 'yes' }],
    [{ default_user_role: 'owner' }],
    [{ purge: true }],
  ])('rejects %j with 400 request/invalid', async (body) => {
    const o = await signupTenant(t);
    const res = await t.http().patch(`/v1/auth/dashboard/tenants/${o.slug}/settings/anonymous`).set('Cookie', o.cookie).set('X-CSRF-Token', o.csrf).send(body).expect(400);
    expect(res.body.code).toBe('request/invalid');
  });

  it('accepts the bounds 1 and 180; members cannot write; other tenants get 404', async () => {
    const o = await signupTenant(t);
    const url = `/v1/auth/dashboard/tenants/${o.slug}/settings/anonymous`;
    await t.http().patch(url).set('Cookie', o.cookie).set('X-CSRF-Token', o.csrf).send({ anonymous_user_ttl_days: 1 }).expect(200);
    await t.http().patch(url).set('Cookie', o.cookie).set('X-CSRF-Token', o.csrf).send({ anonymous_user_ttl_days: 180 }).expect(200);
    const inv = await t.http().post(`/v1/auth/dashboard/tenants/${o.slug}/members`).set('Cookie', o.cookie).set('X-CSRF-Token', o.csrf).send({ email: uniqueEmail(), role: 'member' }).expect(201);
    const acc = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    const mcookie = acc.headers['set-cookie'][0].split(';')[0];
    await t.http().get(url).set('Cookie', mcookie).expect(200);
    expect((await t.http().patch(url).set('Cookie', mcookie).set('X-CSRF-Token', acc.body.csrf_token).send({ anonymous_user_ttl_days: 3 }).expect(403)).body.code).toBe('auth/forbidden');
    const stranger = await signupTenant(t);
    await t.http().get(url).set('Cookie', stranger.cookie).expect(404);
    await t.http().patch(url).set('Cookie', stranger.cookie).set('X-CSRF-Token', stranger.csrf).send({ anonymous_user_ttl_days: 3 }).expect(404);
  });
});
