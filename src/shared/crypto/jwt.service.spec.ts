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
});
