import { generateKeyPairSync } from 'crypto';
import type Redis from 'ioredis';
import { loadConfig } from '../../config/config';
import type { Db } from '../db/db.service';
import type { EnvelopeCipher } from './envelope-cipher';
import { SigningKeysService } from './signing-keys.service';
import { EventsService } from '../events/events.service';

describe('SigningKeysService.reload', () => {
  const row = (kid: string) => {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    return {
      kid,
      public_pem: publicKey.export({ type: 'spki', format: 'pem' }) as string,
      private_enc: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
      created_at: new Date(),
      signing: true,
    };
  };

  /** Keys over a database whose queries answer only when the test says so, with the table of the moment they were made. */
  const setup = () => {
    let table = [row('old')];
    const pending: Array<() => void> = [];
    const db = {
      query: jest.fn(() => {
        const rows = table;
        return new Promise((resolve) => pending.push(() => resolve(rows)));
      }),
    } as unknown as Db;
    const cipher = { decryptString: (s: string) => s } as unknown as EnvelopeCipher;
    const keys = new SigningKeysService(db, cipher, loadConfig({ NODE_ENV: 'test' }), {} as Redis, {} as EventsService);
    const tick = () => new Promise((r) => setImmediate(r));
    return { keys, pending, tick, rotate: () => (table = [row('new')]) };
  };

  it('overlapping reloads end with the newest view of the table, even when an older query answers last', async () => {
    const { keys, pending, tick, rotate } = setup();
    const first = keys.reload(); // say, the periodic reload: it reads the table before the rotation
    await tick();
    rotate(); // a rotation commits, and is announced
    const second = keys.reload();
    await tick();
    expect(pending).toHaveLength(2);
    pending[1](); // the newer query answers first
    await second;
    expect(keys.signingKey().kid).toBe('new');
    pending[0](); // the older one last: dropped
    await first;
    expect(keys.signingKey().kid).toBe('new');
    expect(keys.trusts('old')).toBe(false);
  });

  it('a load whose query never answers holds up no later load', async () => {
    const { keys, pending, tick, rotate } = setup();
    void keys.reload(); // hangs for ever (a frozen connection)
    await tick();
    rotate();
    const later = keys.reload();
    await tick();
    pending[1]();
    await later;
    expect(keys.signingKey().kid).toBe('new');
  });
});
