import { decodeProtectedHeader } from 'jose';
import { APP_CONFIG } from '../../../src/config/config';
import { EnvelopeCipher } from '../../../src/shared/crypto/envelope-cipher';
import { JwtService } from '../../../src/shared/crypto/jwt.service';
import { SigningKeysService } from '../../../src/shared/crypto/signing-keys.service';
import { Db } from '../../../src/shared/db/db.service';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createIsolatedTestApp } from '../../setup/isolated-db';
import { EventsService } from '../../../src/shared/events/events.service';

/**
 * docs/scaling.md: an instance reloads the signing keys at once when it meets an unknown kid (it
 * missed the rotation's announcement). Requests that meet the kid while that reload runs wait for
 * it, rather than 401: after `keys:rotate --now`, every client refreshing at another instance
 * brings the new kid here at once. Its own database: the rotation changes the keys of all.
 */
describe("an instance that missed a rotation meets the new kid on concurrent requests", () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createIsolatedTestApp();
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  it('every concurrent request carrying a valid token of the just-rotated key is accepted while one reload runs', async () => {
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201);
    const keys = t.app.get(SigningKeysService) as unknown as { subscriber?: { disconnect(): void }; timer?: NodeJS.Timeout; switchTimer?: NodeJS.Timeout; load: () => Promise<unknown> };
    // this instance misses the announcement (Redis away for it) and its periodic reload is not due
    keys.subscriber?.disconnect();
    clearInterval(keys.timer);
    clearTimeout(keys.switchTimer);
    // another process (the CLI) rotates with --now and signs with the new key
    const other = new SigningKeysService(t.app.get(Db), t.app.get(EnvelopeCipher), t.app.get(APP_CONFIG), t.app.get(REDIS), t.app.get(EventsService));
    const { kid } = await other.rotate({ immediate: true });
    const payload = JSON.parse(Buffer.from(reg.body.access_token.split('.')[1], 'base64url').toString());
    const { iss: _i, aud: _a, exp: _e, iat: _t, jti: _j, ...claims } = payload;
    const { token } = await new JwtService(other, t.app.get(APP_CONFIG)).sign(claims);
    expect(decodeProtectedHeader(token).kid).toBe(kid);
    // the key table read takes 300 ms (a database under load): the other requests arrive meanwhile
    let loads = 0;
    const load = keys.load.bind(keys);
    keys.load = async () => {
      loads++;
      await new Promise((r) => setTimeout(r, 300));
      return load();
    };
    const statuses = (await Promise.all(Array.from({ length: 6 }, () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`)))).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    expect(loads).toBe(1);
    // an unknown kid (garbage) still costs at most one reload per second
    const forged = `${Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'at+jwt', kid: 'no-such-kid' })).toString('base64url')}.${token.split('.')[1]}.${token.split('.')[2]}`;
    const refused = await Promise.all(Array.from({ length: 4 }, () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${forged}`)));
    expect(refused.map((r) => r.status)).toEqual([401, 401, 401, 401]);
    expect(loads).toBeLessThanOrEqual(2);
  });
});
