import { generateKeyPairSync, randomUUID } from 'crypto';
import * as jwt from 'jsonwebtoken';
import { loadConfig } from '../../config/config';
import { JwtService, TokenVerificationError } from './jwt.service';
import { SigningKeysService } from './signing-keys.service';

describe('JwtService', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const other = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const config = loadConfig({ NODE_ENV: 'test', PUBLIC_BASE_URL: 'https://auth.example' });
  const keys = {
    signingKey: () => ({ kid: 'k1', key: privateKey }),
    verificationKey: async (kid: string) => (kid === 'k1' ? publicKey : undefined),
    trusts: (kid: string) => kid === 'k1',
  } as unknown as SigningKeysService;
  const service = new JwtService(keys, config);
  afterAll(() => service.onModuleDestroy());
  const claims = { sub: randomUUID(), tenant_id: randomUUID(), sid: randomUUID(), scope: 'openid', amr: ['pwd'], aal: 'AAL1' as const, role: 'member', is_anonymous: false };

  it('signs a compact JWS that jsonwebtoken verifies, with the header jsonwebtoken writes', async () => {
    const { token, claims: full } = await service.sign(claims, 60);
    const verified = jwt.verify(token, publicKey, { algorithms: ['RS256'], issuer: 'https://auth.example', audience: 'https://auth.example' });
    expect(verified).toEqual(full);
    expect(full.exp - full.iat).toBe(60);
    // an access token (RFC 9068 section 2.1)
    expect(jwt.decode(token, { complete: true })?.header).toEqual({ alg: 'RS256', typ: 'at+jwt', kid: 'k1' });
    // byte for byte what jsonwebtoken itself produces for the same claims, key and header (PKCS#1 v1.5 is deterministic)
    expect(token).toBe(jwt.sign(full, privateKey, { algorithm: 'RS256', keyid: 'k1', header: { alg: 'RS256', typ: 'at+jwt' } }));
  });

  it('verifies its own tokens and refuses a signature by another key, a tampered payload and an expired token', async () => {
    const { token } = await service.sign(claims);
    await expect(service.verify(token)).resolves.toMatchObject({ sub: claims.sub, aal: 'AAL1' });
    const forged = jwt.sign({ ...claims, iss: 'https://auth.example', aud: 'https://auth.example', exp: Math.floor(Date.now() / 1000) + 60 }, other.privateKey, { algorithm: 'RS256', keyid: 'k1' });
    await expect(service.verify(forged)).rejects.toBeInstanceOf(TokenVerificationError);
    const [h, p, s] = token.split('.');
    const tampered = [h, Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), role: 'admin' })).toString('base64url'), s].join('.');
    await expect(service.verify(tampered)).rejects.toBeInstanceOf(TokenVerificationError);
    const { token: expired } = await service.sign(claims, -1);
    await expect(service.verify(expired)).rejects.toThrow('jwt expired');
  });

  it('names the client (RFC 9068 section 2.2): the tenant for a user token, the agent for an agent token; verify refuses any other', async () => {
    const { claims: user } = await service.sign(claims);
    expect(user.client_id).toBe(claims.tenant_id);
    const agent = randomUUID();
    const { claims: agentClaims } = await service.sign({ ...claims, sid: undefined, act: { sub: agent }, client_id: agent });
    expect(agentClaims.client_id).toBe(agent);
    const raw = (extra: Record<string, unknown>) => {
      const now = Math.floor(Date.now() / 1000);
      const payload = { ...claims, iss: 'https://auth.example', aud: 'https://auth.example', iat: now, exp: now + 60, jti: randomUUID(), ...extra };
      return jwt.sign(payload, privateKey, { algorithm: 'RS256', keyid: 'k1', header: { alg: 'RS256', typ: 'at+jwt' } });
    };
    // signed before client_id was a claim: still good
    await expect(service.verify(raw({}))).resolves.toMatchObject({ sub: claims.sub });
    await expect(service.verify(raw({ client_id: claims.tenant_id }))).resolves.toMatchObject({ sub: claims.sub });
    // another tenant's, or an agent's without act: not a token this service signs
    await expect(service.verify(raw({ client_id: randomUUID() }))).rejects.toBeInstanceOf(TokenVerificationError);
    await expect(service.verify(raw({ act: { sub: agent }, client_id: claims.tenant_id }))).rejects.toBeInstanceOf(TokenVerificationError);
    await expect(service.verify(raw({ act: { sub: agent }, client_id: agent }))).resolves.toMatchObject({ client_id: agent });
  });

  it("takes subject_sid (an agent token's subject session) only on an agent token, and only a UUID", async () => {
    const now = Math.floor(Date.now() / 1000);
    const raw = (extra: Record<string, unknown>) =>
      jwt.sign({ ...claims, sid: undefined, iss: 'https://auth.example', aud: 'https://auth.example', iat: now, exp: now + 60, jti: randomUUID(), ...extra }, privateKey, { algorithm: 'RS256', keyid: 'k1' });
    const agent = randomUUID();
    const sid = randomUUID();
    await expect(service.verify(raw({ act: { sub: agent }, subject_sid: sid }))).resolves.toMatchObject({ subject_sid: sid });
    await expect(service.verify(raw({ subject_sid: sid }))).rejects.toBeInstanceOf(TokenVerificationError);
    await expect(service.verify(raw({ act: { sub: agent }, subject_sid: 'not-a-uuid' }))).rejects.toBeInstanceOf(TokenVerificationError);
  });

  describe('the cache of verified tokens', () => {
    afterEach(() => jest.useRealTimers());

    /** a service whose signature checks are counted (each cache miss looks the key up once) */
    const counted = () => {
      const lookups = jest.fn(keys.verificationKey);
      const s = new JwtService({ ...keys, verificationKey: lookups } as unknown as SigningKeysService, config);
      return { s, lookups, size: () => s['verified'].size, sweeper: () => s['sweeper'] };
    };

    it('is swept every 60 s of entries past their time, by an unref\'d timer started with the first entry and cleared on module destroy', async () => {
      jest.useFakeTimers({ now: Date.now() });
      const { s, lookups, size, sweeper } = counted();
      expect(sweeper()).toBeUndefined(); // a process that never verifies (worker, CLI) has no timer
      const tokens = await Promise.all([1, 2, 3].map(() => s.sign(claims, 3600).then((r) => r.token)));
      for (const token of tokens) await s.verify(token);
      for (const token of tokens) await s.verify(token);
      expect(lookups).toHaveBeenCalledTimes(3); // the second round came from the cache
      expect(size()).toBe(3);
      expect(sweeper()?.hasRef()).toBe(false);
      expect(jest.getTimerCount()).toBe(1);
      // entries live 30 s at most, but stay (dead) until the sweep
      jest.advanceTimersByTime(31_000);
      expect(size()).toBe(3);
      jest.advanceTimersByTime(30_000);
      expect(size()).toBe(0);
      // a token verified after the sweep is cached anew (and the sweep goes on)
      await s.verify(tokens[0]);
      expect(lookups).toHaveBeenCalledTimes(4);
      expect(size()).toBe(1);
      s.onModuleDestroy();
      expect(sweeper()).toBeUndefined();
      expect(jest.getTimerCount()).toBe(0);
    });

    it('sweepVerified deletes only the entries past their time', async () => {
      // the clock stands still: the instants below are exact, however long signing takes
      jest.useFakeTimers({ now: Date.now() });
      const { s, size } = counted();
      const a = (await s.sign(claims, 3600)).token;
      const b = (await s.sign(claims, 10)).token;
      await s.verify(a);
      await s.verify(b);
      expect(size()).toBe(2);
      expect(s.sweepVerified(Date.now())).toBe(0);
      // b's entry ends with its token (10 s), a's within the cache lifetime (30 s)
      expect(s.sweepVerified(Date.now() + 11_000)).toBe(1);
      expect(size()).toBe(1);
      expect(s.sweepVerified(Date.now() + 31_000)).toBe(1);
      expect(size()).toBe(0);
      s.onModuleDestroy();
    });

    it('an entry ends with its token: once expired it is deleted at its lookup, and an expired token is never cached', async () => {
      jest.useFakeTimers({ now: Date.now() });
      const { s, lookups, size } = counted();
      const { token } = await s.sign(claims, 5);
      await s.verify(token);
      expect(size()).toBe(1);
      jest.advanceTimersByTime(6_000); // the token expired; its entry is past its time, not swept yet
      await expect(s.verify(token)).rejects.toThrow('jwt expired');
      expect(size()).toBe(0);
      await expect(s.verify(token)).rejects.toThrow('jwt expired');
      expect(size()).toBe(0);
      expect(lookups).toHaveBeenCalledTimes(3);
      s.onModuleDestroy();
    });
  });
});
