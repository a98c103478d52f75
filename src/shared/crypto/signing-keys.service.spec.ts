import { generateKeyPairSync } from 'crypto';
import type Redis from 'ioredis';
import { loadConfig } from '../../config/config';
import type { Db } from '../db/db.service';
import type { EnvelopeCipher } from './envelope-cipher';
import { SigningKeysService } from './signing-keys.service';

describe('SigningKeysService.reload', () => {
  const pem = (modulusLength = 2048) => {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength });
    return { public_pem: publicKey.export({ type: 'spki', format: 'pem' }) as string, private_enc: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
  };
  const row = (kid: string) => ({ kid, ...pem(), created_at: new Date(), signing: true });

  it('overlapping reloads end with the newest view of the table, even when an older query answers last', async () => {
    // the table as it is when each query is made: the first sees key "old", later ones key "new"
    let table = [row('old')];
    const answers: Array<() => void> = [];
    const db = {
      query: jest.fn(() => {
        const rows = table;
        return new Promise((resolve) => answers.push(() => resolve(rows)));
      }),
    } as unknown as Db;
    const cipher = { decryptString: (s: string) => s } as unknown as EnvelopeCipher;
    const keys = new SigningKeysService(db, cipher, loadConfig({ NODE_ENV: 'test' }), {} as Redis);

    const first = keys.reload(); // say, the periodic reload: it reads the table before the rotation
    await new Promise((r) => setImmediate(r));
    table = [row('new')]; // a rotation commits, and is announced
    const second = keys.reload();
    const third = keys.reload(); // a second trigger before the second load starts joins it
    // the database answers the newest pending query first (a slow older one answers last)
    const settled = Promise.all([first, second, third]);
    let done = false;
    void settled.then(() => (done = true));
    while (!done) {
      await new Promise((r) => setImmediate(r));
      answers.pop()?.();
    }
    expect(keys.signingKey().kid).toBe('new');
    expect(third).toBe(second);
    expect((db.query as jest.Mock).mock.calls).toHaveLength(2);
  });
});
