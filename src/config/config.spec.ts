import { DEV_KEY_ENCRYPTION_KEY, loadConfig } from './config';

describe('loadConfig', () => {
  const kek = Buffer.alloc(32, 1).toString('base64');

  it('applies defaults and freezes the result', () => {
    const c = loadConfig({ NODE_ENV: 'development' });
    expect(c.PORT).toBe(3001);
    expect(c.TOKEN_AUDIENCE).toBe(c.PUBLIC_BASE_URL);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('refuses to start in production with a missing or default secret, listing every problem', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/KEY_ENCRYPTION_KEY: must be set/);
    expect(() => loadConfig({ NODE_ENV: 'production', KEY_ENCRYPTION_KEY: DEV_KEY_ENCRYPTION_KEY })).toThrow(/KEY_ENCRYPTION_KEY/);
    const err = (() => {
      try {
        loadConfig({ NODE_ENV: 'production', KEY_ENCRYPTION_KEY: kek });
      } catch (e) {
        return (e as Error).message;
      }
      return '';
    })();
    for (const v of ['DATABASE_URL', 'REDIS_URL', 'PUBLIC_BASE_URL', 'SMTP_URL']) expect(err).toContain(v);
    expect(() =>
      loadConfig({ NODE_ENV: 'production', KEY_ENCRYPTION_KEY: kek, DATABASE_URL: 'postgres://x/y', REDIS_URL: 'redis://x', PUBLIC_BASE_URL: 'https://auth.example', SMTP_URL: 'smtp://mail' }),
    ).not.toThrow();
  });

  it('rejects malformed values', () => {
    expect(() => loadConfig({ PORT: 'abc' })).toThrow(/PORT/);
    expect(() => loadConfig({ KEY_ENCRYPTION_KEY: Buffer.alloc(16).toString('base64') + 'xxxxxxxxxxxxxxxxxxxx' })).toThrow(/KEY_ENCRYPTION_KEY/);
    expect(() => loadConfig({ NODE_ENV: 'staging' })).toThrow(/NODE_ENV/);
  });

  it('lowers the argon2 cost only under NODE_ENV=test', () => {
    expect(loadConfig({ NODE_ENV: 'test' }).ARGON2_MEMORY_KIB).toBeLessThan(19456);
    expect(loadConfig({ NODE_ENV: 'development' }).ARGON2_MEMORY_KIB).toBe(19456);
    expect(loadConfig({ NODE_ENV: 'development' }).ARGON2_TIME_COST).toBe(2);
  });
});
