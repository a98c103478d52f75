import { DEV_KEY_ENCRYPTION_KEY, developmentModeWarning, loadConfig, loadMigrationConfig, meetsOwaspArgon2id, OWASP_ARGON2ID_ROWS, parseDnsServers } from './config';

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
    for (const v of ['DATABASE_URL', 'REDIS_URL', 'PUBLIC_BASE_URL', 'SMTP_URL', 'ACCOUNTS_URL', 'EMAIL_FROM']) expect(err).toContain(v);
    expect(() =>
      loadConfig({ NODE_ENV: 'production', KEY_ENCRYPTION_KEY: kek, DATABASE_URL: 'postgres://x/y', REDIS_URL: 'redis://x', PUBLIC_BASE_URL: 'https://auth.example', SMTP_URL: 'smtp://mail', ACCOUNTS_URL: 'https://app.example', EMAIL_FROM: 'no-reply@example.com' }),
    ).not.toThrow();
  });

  it('production refuses the development key in any spelling that decodes to it (review: unpadded, a trailing newline, a leading space, URL-safe started)', () => {
    const prod = { NODE_ENV: 'production', DATABASE_URL: 'postgres://x/y', REDIS_URL: 'redis://x', SMTP_URL: 'smtp://mail', PUBLIC_BASE_URL: 'https://auth.example', ACCOUNTS_URL: 'https://app.example', EMAIL_FROM: 'no-reply@example.com' };
    const dev = Buffer.from(DEV_KEY_ENCRYPTION_KEY, 'base64');
    const spellings = [DEV_KEY_ENCRYPTION_KEY, DEV_KEY_ENCRYPTION_KEY.replace(/=+$/, ''), `${DEV_KEY_ENCRYPTION_KEY}\n`, ` ${DEV_KEY_ENCRYPTION_KEY}`, dev.toString('base64url')];
    for (const spelling of spellings) {
      expect(() => loadConfig({ ...prod, KEY_ENCRYPTION_KEY: spelling })).toThrow(/KEY_ENCRYPTION_KEY: must be set to a secret of your own/);
      // development reads every spelling as the same key
      expect(loadConfig({ KEY_ENCRYPTION_KEY: spelling }).keyEncryptionKey).toEqual(dev);
    }
    // a key of one's own with a trailing newline is that key
    expect(loadConfig({ ...prod, KEY_ENCRYPTION_KEY: `${kek}\n` }).keyEncryptionKey).toEqual(Buffer.from(kek, 'base64'));
    // characters outside the alphabet are refused (Buffer.from would skip them: a typo decoding to another key), never shown
    const typo = `${kek.slice(0, 10)}!${kek.slice(10)}`;
    expect(() => loadConfig({ KEY_ENCRYPTION_KEY: typo })).toThrow(/KEY_ENCRYPTION_KEY: is not base64 \(the value is not shown\)/);
    expect(() => loadConfig({ KEY_ENCRYPTION_KEY: Buffer.alloc(16, 1).toString('base64') })).toThrow(/KEY_ENCRYPTION_KEY: must be base64 of exactly 32 bytes \(it decodes to 16\)/);
  });

  it('production refuses the development URLs and sender, set or copied from .env.example (loopback hosts, @localhost)', () => {
    const prod = { NODE_ENV: 'production', KEY_ENCRYPTION_KEY: kek, DATABASE_URL: 'postgres://x/y', REDIS_URL: 'redis://x', SMTP_URL: 'smtp://mail', PUBLIC_BASE_URL: 'https://auth.example', ACCOUNTS_URL: 'https://app.example', EMAIL_FROM: 'no-reply@example.com' };
    for (const [name, value] of [
      ['PUBLIC_BASE_URL', 'http://localhost:3001'],
      ['PUBLIC_BASE_URL', 'http://127.0.0.1:3001'],
      ['ACCOUNTS_URL', 'http://localhost:3001'],
      ['ACCOUNTS_URL', 'http://[::1]:3001'],
      ['ACCOUNTS_URL', 'https://app.localhost'],
      ['PUBLIC_BASE_URL', 'http://0.0.0.0:3001'],
      ['PUBLIC_BASE_URL', 'http://[::ffff:127.0.0.1]:3001'],
      ['ACCOUNTS_URL', 'http://[::]:3001'],
      ['ACCOUNTS_URL', 'http://127.1.2.3'],
      ['EMAIL_FROM', 'no-reply@localhost'],
      ['EMAIL_FROM', 'Acme <no-reply@localhost>'],
    ])
      expect(() => loadConfig({ ...prod, [name]: value })).toThrow(new RegExp(`${name}: must be`));
    // private and public addresses are not this machine
    for (const url of ['http://10.0.0.5:3001', 'http://[::ffff:10.0.0.5]:3001', 'https://[2001:db8::1]']) expect(() => loadConfig({ ...prod, PUBLIC_BASE_URL: url })).not.toThrow();
    // a value of only spaces (a mounted secret holding a newline) is unset in production too, not set
    for (const name of ['SMTP_URL', 'DATABASE_URL', 'REDIS_URL', 'PUBLIC_BASE_URL', 'ACCOUNTS_URL', 'EMAIL_FROM', 'KEY_ENCRYPTION_KEY'])
      for (const blank of ['  ', '\n'])
        expect(() => loadConfig({ ...prod, [name]: blank })).toThrow(new RegExp(`${name}: must be set`));
    expect(() => loadMigrationConfig({ NODE_ENV: 'production', DATABASE_URL: ' ' })).toThrow(/DATABASE_URL: must be set in production/);
    expect(loadMigrationConfig({ NODE_ENV: 'production', DATABASE_URL: 'postgres://x/y' }).DATABASE_URL).toBe('postgres://x/y');
    // outside production they are the defaults
    expect(() => loadConfig({ NODE_ENV: 'development', PUBLIC_BASE_URL: 'http://127.0.0.1:3001', EMAIL_FROM: 'no-reply@localhost' })).not.toThrow();
    expect(loadConfig({ ...prod, EMAIL_FROM: 'Acme <no-reply@example.com>' }).EMAIL_FROM).toBe('Acme <no-reply@example.com>');
  });

  it('base URLs need a scheme and no query or fragment; EMAIL_FROM is an address; CORS_ORIGINS are origins', () => {
    for (const name of ['PUBLIC_BASE_URL', 'ACCOUNTS_URL'])
      for (const bad of ['auth.example.com', 'https://app.example.com/?tenant=acme', 'https://app.example.com#x', 'ftp://app.example.com'])
        expect(() => loadConfig({ NODE_ENV: 'development', [name]: bad })).toThrow(new RegExp(name));
    expect(loadConfig({ NODE_ENV: 'development', ACCOUNTS_URL: 'https://app.example.com/auth' }).ACCOUNTS_URL).toBe('https://app.example.com/auth');
    for (const bad of ['not an address', 'no-reply', 'a@b@c', 'Name <>'])
      expect(() => loadConfig({ NODE_ENV: 'development', EMAIL_FROM: bad })).toThrow(/EMAIL_FROM: must be an address/);
    for (const bad of ['*', 'https://app.example.com/', 'app.example.com', 'https://app.example.com/path', 'https://App.example.com'])
      expect(() => loadConfig({ NODE_ENV: 'development', CORS_ORIGINS: bad })).toThrow(/CORS_ORIGINS/);
    expect(loadConfig({ NODE_ENV: 'development', CORS_ORIGINS: 'https://app.example, http://localhost:5173' }).corsOrigins).toEqual(['https://app.example', 'http://localhost:5173']);
    // an app's own scheme, as its WebView sends it (node's URL origin of these is "null")
    const apps = ['capacitor://localhost', 'ionic://localhost', 'tauri://localhost', 'chrome-extension://abcdefghijklmnopabcdefghijklmnop'];
    expect(loadConfig({ NODE_ENV: 'development', CORS_ORIGINS: apps.join(',') }).corsOrigins).toEqual(apps);
    for (const bad of ['capacitor://localhost/', 'capacitor://localhost/app', 'capacitor://', 'capacitor:localhost', 'capacitor://user@localhost', 'capacitor://local host'])
      expect(() => loadConfig({ NODE_ENV: 'development', CORS_ORIGINS: bad })).toThrow(/CORS_ORIGINS/);
    for (const name of ['TURNSTILE_SITEVERIFY_URL', 'RATE_LIMIT_DOCS_URL']) expect(() => loadConfig({ NODE_ENV: 'development', [name]: 'example.com/x' })).toThrow(new RegExp(name));
  });

  it('a value of only spaces is unset (its default), never 0; TRUST_PROXY is trimmed', () => {
    const c = loadConfig({ NODE_ENV: 'development', PORT: ' ', ENUMERATION_SAFE_MIN_RESPONSE_MS: '  ', DATABASE_STATEMENT_TIMEOUT_MS: ' ', TRUST_PROXY: ' ', METRICS_ENABLED: ' ' });
    expect(c.PORT).toBe(3001);
    expect(c.ENUMERATION_SAFE_MIN_RESPONSE_MS).toBe(150);
    expect(c.DATABASE_STATEMENT_TIMEOUT_MS).toBe(30000);
    expect(c.TRUST_PROXY).toBe('loopback');
    expect(loadConfig({ NODE_ENV: 'development', TRUST_PROXY: 'false ' }).TRUST_PROXY).toBe('false');
    expect(loadConfig({ NODE_ENV: 'development', METRICS_ENABLED: ' true' }).METRICS_ENABLED).toBe(true);
  });

  it('upper bounds: timers within what node can wait, lifetimes and windows within ten years, argon2 within what it computes', () => {
    for (const [name, value] of [
      ['OUTBOX_POLL_MS', '3000000000'],
      ['WEBHOOK_LOCK_MS', '1e12'],
      ['WEBHOOK_BACKOFF_BASE_MS', '3000000000'],
      ['REFRESH_TOKEN_TTL_SECONDS', '1e13'],
      ['DASHBOARD_SESSION_IDLE_SECONDS', '3e11'],
      ['DASHBOARD_SESSION_ABSOLUTE_SECONDS', '1e13'],
      ['INVITE_TTL_SECONDS', '1e13'],
      ['IDEMPOTENCY_TTL_SECONDS', '1e13'],
      ['LOGIN_FAILURE_WINDOW_SECONDS', '1e13'],
      ['ARGON2_MEMORY_KIB', '1e12'],
      ['ARGON2_PARALLELISM', '1000'],
    ])
      expect(() => loadConfig({ NODE_ENV: 'development', [name]: value })).toThrow(new RegExp(name));
    expect(() => loadConfig({ NODE_ENV: 'development', ARGON2_MEMORY_KIB: '47104', ARGON2_TIME_COST: '1', ARGON2_PARALLELISM: '16' })).not.toThrow();
    // argon2 needs 8 KiB per lane: 19 MiB computes 32 lanes, and the least memory allowed 128
    expect(() => loadConfig({ NODE_ENV: 'development', ARGON2_MEMORY_KIB: '19456', ARGON2_TIME_COST: '2', ARGON2_PARALLELISM: '32' })).not.toThrow();
    expect(() => loadConfig({ NODE_ENV: 'development', ARGON2_PARALLELISM: '129' })).toThrow(/ARGON2_PARALLELISM/);
  });

  it('REDIS_URL names its database by number; REDIS_SENTINELS takes Docker service names (underscores)', () => {
    expect(() => loadConfig({ NODE_ENV: 'development', REDIS_URL: 'redis://127.0.0.1:6379/abc' })).toThrow(/REDIS_URL/);
    expect(() => loadConfig({ NODE_ENV: 'development', REDIS_URL: 'redis://127.0.0.1:6379/3' })).not.toThrow();
    // options in a query would be ignored (database 0): refused, the way to say it named
    for (const bad of ['redis://127.0.0.1:6379/?db=2', 'redis://127.0.0.1:6379?family=6', 'rediss://h:6380/1#x'])
      expect(() => loadConfig({ NODE_ENV: 'development', REDIS_URL: bad })).toThrow(/REDIS_URL: options in a query or fragment are not read \(give the database as the path/);
    expect(() => loadConfig({ NODE_ENV: 'development', REDIS_SENTINELS: 'redis_sentinel_1:26379,redis-sentinel-2:26379', REDIS_SENTINEL_MASTER: 'mymaster' })).not.toThrow();
  });

  it('warns when development mode (the default) is configured like a deployment', () => {
    expect(developmentModeWarning(loadConfig({ NODE_ENV: 'development' }))).toBeUndefined();
    expect(developmentModeWarning(loadConfig({ NODE_ENV: 'development', PUBLIC_BASE_URL: 'http://127.0.0.1:3101' }))).toBeUndefined();
    expect(developmentModeWarning(loadConfig({ NODE_ENV: 'development', PUBLIC_BASE_URL: 'https://auth.example.com' }))).toMatch(/set NODE_ENV=production/);
    expect(developmentModeWarning(loadConfig({ NODE_ENV: 'test', PUBLIC_BASE_URL: 'https://auth.example.com' }))).toBeUndefined();
  });

  it('TURNSTILE_HOSTNAMES: host names only, lower-cased', () => {
    expect(loadConfig({ NODE_ENV: 'development', TURNSTILE_HOSTNAMES: 'App.Example.com, www.example.com' }).turnstileHostnames).toEqual(['app.example.com', 'www.example.com']);
    for (const bad of ['https://app.example.com', 'app.example.com:443', 'app.example.com/signup', 'a_b.example', '-x.example'])
      expect(() => loadConfig({ NODE_ENV: 'development', TURNSTILE_HOSTNAMES: bad })).toThrow(/TURNSTILE_HOSTNAMES/);
  });

  it('rejects malformed values', () => {
    expect(() => loadConfig({ PORT: 'abc' })).toThrow(/PORT/);
    expect(() => loadConfig({ KEY_ENCRYPTION_KEY: Buffer.alloc(16).toString('base64') + 'xxxxxxxxxxxxxxxxxxxx' })).toThrow(/KEY_ENCRYPTION_KEY/);
    expect(() => loadConfig({ NODE_ENV: 'staging' })).toThrow(/NODE_ENV/);
    // a boolean takes 1/true/yes/on and 0/false/no/off (any case); a typo stops the start
    for (const typo of ['ture', 'enabled', 'Y', '2']) expect(() => loadConfig({ METRICS_ENABLED: typo })).toThrow(/METRICS_ENABLED/);
    for (const off of ['0', 'false', 'No', ' OFF ']) expect(loadConfig({ METRICS_ENABLED: off }).METRICS_ENABLED).toBe(false);
    for (const on of ['1', 'TRUE', 'yes', 'on']) expect(loadConfig({ METRICS_ENABLED: on }).METRICS_ENABLED).toBe(true);
  });

  it('REDIS_REVOCATION_REPLICAS is off by default; its wait must be below the command timeout', () => {
    expect(loadConfig({})).toMatchObject({ REDIS_REVOCATION_REPLICAS: 0, REDIS_REVOCATION_WAIT_MS: 500 });
    expect(loadConfig({ REDIS_REVOCATION_REPLICAS: '2', REDIS_REVOCATION_WAIT_MS: '1999' })).toMatchObject({ REDIS_REVOCATION_REPLICAS: 2, REDIS_REVOCATION_WAIT_MS: 1999 });
    expect(() => loadConfig({ REDIS_REVOCATION_REPLICAS: '1', REDIS_REVOCATION_WAIT_MS: '2000' })).toThrow(/REDIS_REVOCATION_WAIT_MS: must be below REDIS_COMMAND_TIMEOUT_MS/);
    expect(() => loadConfig({ REDIS_REVOCATION_REPLICAS: '17' })).toThrow(/REDIS_REVOCATION_REPLICAS/);
  });

  it('METRICS_TOKEN is optional, and a short one (guessable) stops the start', () => {
    expect(loadConfig({}).METRICS_TOKEN).toBeUndefined();
    expect(() => loadConfig({ METRICS_TOKEN: 'short-token' })).toThrow(/METRICS_TOKEN/);
    expect(loadConfig({ METRICS_TOKEN: 'a'.repeat(32) }).METRICS_TOKEN).toBe('a'.repeat(32));
    // from a mounted secret file: its final newline (or blanks) is not part of the token
    expect(loadConfig({ METRICS_TOKEN: `${'a'.repeat(32)}\n` }).METRICS_TOKEN).toBe('a'.repeat(32));
    // a blank one is unset, as every blank variable is (loadConfig)
    expect(loadConfig({ METRICS_TOKEN: '  \n' }).METRICS_TOKEN).toBeUndefined();
  });

  it('TRUST_PROXY names the proxies; a hop count is refused (a client could send X-Forwarded-For itself)', () => {
    for (const v of ['1', '2', ' 3 ']) expect(() => loadConfig({ TRUST_PROXY: v })).toThrow(/TRUST_PROXY must name the proxies/);
    for (const v of ['loopback', 'true', 'false', '10.0.0.0/8', '127.0.0.1,192.168.1.0/24', '::1']) expect(loadConfig({ TRUST_PROXY: v }).TRUST_PROXY).toBe(v);
  });

  it('DATABASE_URL, REDIS_URL and SMTP_URL must parse with their scheme; a bad one is named, its value (a password) never shown', () => {
    for (const env of [
      { DATABASE_URL: 'postgres:///authp?host=/run/postgresql' },
      { DATABASE_URL: 'postgresql://u:p@db.internal:5432/authp' },
      { REDIS_URL: 'rediss://:pw@cache.internal:6380/2' },
      { SMTP_URL: 'smtps://mailuser:pw@smtp.example.com:465' },
    ]) expect(() => loadConfig(env)).not.toThrow();
    for (const [name, value] of [
      ['SMTP_URL', 'smtp://mailuser:S3cretSmtpPass@127.0.0.1:99999'],
      ['SMTP_URL', 'mailuser:S3cretSmtpPass@smtp.example.com'],
      ['REDIS_URL', 'redis://:S3cretRedisPass@127.0.0.1:99999'],
      ['REDIS_URL', 'http://:S3cretRedisPass@127.0.0.1:6379'],
      ['DATABASE_URL', 'mysql://u:S3cretDbPass@db:3306/x'],
    ]) {
      let message = '';
      try {
        loadConfig({ [name]: value });
      } catch (e) {
        message = (e as Error).message;
      }
      expect(message).toContain(`${name}: not a valid`);
      expect(message).not.toMatch(/S3cret/);
    }
  });

  it('TRUST_PROXY is checked in the form Fastify takes it: a typo stops the start naming the variable', () => {
    for (const v of ['uniquelocal, 10.0.0.0/255.0.0.0', 'fd00::/8, linklocal', '10.1.2.3/32', '10.0.0.0/255.255.255.255', '10.0.0.0/255.255.240.0']) expect(loadConfig({ TRUST_PROXY: v }).TRUST_PROXY).toBe(v);
    for (const v of ['garbage', 'True', '10.0.0.0/33', '::1/129', '10.0.0.1/8/8', 'loopback,,10.0.0.1', 'fd00::/255.0.0.0', '0.0.0.0/0', '::/0', '10.0.0.0/255.0.255.0', '10.0.0.0/0.0.0.0']) {
      expect(() => loadConfig({ TRUST_PROXY: v })).toThrow(/TRUST_PROXY: .*; expected true, false, or a comma-separated list/);
    }
  });

  it('lowers the argon2 cost only under NODE_ENV=test', () => {
    expect(loadConfig({ NODE_ENV: 'test' }).ARGON2_MEMORY_KIB).toBeLessThan(7168);
    // OWASP's 7 MiB / t=5 / p=1 configuration by default
    expect(loadConfig({ NODE_ENV: 'development' }).ARGON2_MEMORY_KIB).toBe(7168);
    expect(loadConfig({ NODE_ENV: 'development' }).ARGON2_TIME_COST).toBe(5);
    expect(loadConfig({ NODE_ENV: 'development' }).ARGON2_PARALLELISM).toBe(1);
  });

  it('accepts every OWASP argon2id configuration and refuses a cost below all of them outside tests', () => {
    for (const [m, t] of OWASP_ARGON2ID_ROWS) {
      expect(() => loadConfig({ NODE_ENV: 'development', ARGON2_MEMORY_KIB: String(m), ARGON2_TIME_COST: String(t) })).not.toThrow();
      expect(meetsOwaspArgon2id(m, t)).toBe(true);
    }
    expect(meetsOwaspArgon2id(19456, 1)).toBe(false); // 19 MiB needs t=2
    expect(meetsOwaspArgon2id(7168, 4)).toBe(false); // 7 MiB needs t=5
    expect(meetsOwaspArgon2id(65536, 3)).toBe(true);
    expect(() => loadConfig({ NODE_ENV: 'development', ARGON2_MEMORY_KIB: '7168', ARGON2_TIME_COST: '4' })).toThrow(/ARGON2_MEMORY_KIB\/ARGON2_TIME_COST/);
    expect(() => loadConfig({ NODE_ENV: 'production', ARGON2_MEMORY_KIB: '4096', ARGON2_TIME_COST: '3' })).toThrow(/below every OWASP/);
    // tests may set any cost
    expect(() => loadConfig({ NODE_ENV: 'test', ARGON2_MEMORY_KIB: '1024', ARGON2_TIME_COST: '1' })).not.toThrow();
  });

  describe('WEBHOOK_DNS_SERVERS', () => {
    it('is parsed once into webhookDnsServers (trimmed, empty entries dropped); empty: the system servers', () => {
      expect(loadConfig({ NODE_ENV: 'development' }).webhookDnsServers).toEqual([]);
      expect(loadConfig({ NODE_ENV: 'development', WEBHOOK_DNS_SERVERS: ' 1.1.1.1 , 8.8.8.8:5353,,[2606:4700::1111]:53, [::1], 2001:4860:4860::8888 ' }).webhookDnsServers).toEqual([
        '1.1.1.1',
        '8.8.8.8:5353',
        '[2606:4700::1111]:53',
        '[::1]',
        '2001:4860:4860::8888',
      ]);
      for (const ok of ['127.0.0.1:1', '127.0.0.1:65535', '::1', '[::1]:53']) expect(parseDnsServers(ok)).toEqual({ servers: [ok], problems: [] });
    });

    // 1.1.1.1:0 passed the old pattern and then aborted the process (a C++ assertion in
    // setServers) at the first webhook lookup; the others made every lookup throw
    it.each([
      '1.1.1.1:0',
      '[::1]:0',
      '1.1.1.1:65536',
      '1.1.1.1:99999',
      '1.1.1.1:',
      '1.1.1.1:53:53',
      '1.1.1.1:+53',
      '[::1]:',
      '[::1]53',
      '[1.1.1.1]:53',
      '999.1.1.1',
      '1.1.1',
      ':',
      '::::::::',
      'dns.google',
      '8.8.8.8, 999.1.1.1',
    ])('refuses %j at boot, naming WEBHOOK_DNS_SERVERS', (bad) => {
      expect(() => loadConfig({ NODE_ENV: 'development', WEBHOOK_DNS_SERVERS: bad })).toThrow(/WEBHOOK_DNS_SERVERS: "[^"]+" is not valid/);
      expect(parseDnsServers(bad).problems).toHaveLength(1);
    });

    it('lists every bad entry among the other problems', () => {
      const err = (() => {
        try {
          loadConfig({ NODE_ENV: 'development', PORT: 'abc', WEBHOOK_DNS_SERVERS: '1.1.1.1:0, 8.8.8.8, :' });
        } catch (e) {
          return (e as Error).message;
        }
        return '';
      })();
      expect(err).toMatch(/PORT/);
      expect(err).toContain('"1.1.1.1:0" is not valid');
      expect(err).toContain('":" is not valid');
      expect(err).not.toContain('"8.8.8.8"');
    });
  });
});

describe('KEY_ENCRYPTION_KEY_PREVIOUS', () => {
  const current = Buffer.alloc(32, 1).toString('base64');
  const a = Buffer.alloc(32, 2).toString('base64');
  const b = Buffer.alloc(32, 3).toString('base64url'); // URL-safe and unpadded, as KEY_ENCRYPTION_KEY may be
  const prod = { NODE_ENV: 'production', KEY_ENCRYPTION_KEY: current, DATABASE_URL: 'postgres://x/y', REDIS_URL: 'redis://x', SMTP_URL: 'smtp://mail', PUBLIC_BASE_URL: 'https://auth.example', ACCOUNTS_URL: 'https://app.example', EMAIL_FROM: 'no-reply@example.com' };
  const problem = (env: Record<string, string>): string => {
    try {
      loadConfig(env);
    } catch (e) {
      return (e as Error).message;
    }
    return '';
  };

  it('is optional: unset or blank, no previous keys', () => {
    expect(loadConfig({ KEY_ENCRYPTION_KEY: current }).previousKeyEncryptionKeys).toEqual([]);
    expect(loadConfig({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: '  ' }).previousKeyEncryptionKeys).toEqual([]);
  });

  it('decodes a comma-separated list in order (spaces and a trailing comma ignored)', () => {
    const c = loadConfig({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: ` ${a} , ${b},` });
    expect(c.previousKeyEncryptionKeys).toEqual([Buffer.alloc(32, 2), Buffer.alloc(32, 3)]);
    expect(loadConfig({ ...prod, KEY_ENCRYPTION_KEY_PREVIOUS: a }).previousKeyEncryptionKeys).toEqual([Buffer.alloc(32, 2)]);
  });

  it('refuses bad base64 and a wrong length, naming the position and never the value', () => {
    const notBase64 = `${a.slice(0, 20)}!${a.slice(21)}`;
    const msg = problem({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: `${a},${notBase64}` });
    expect(msg).toContain('KEY_ENCRYPTION_KEY_PREVIOUS: key 2 is not base64');
    expect(msg).not.toContain(notBase64);
    expect(msg).not.toContain(a);
    const short = Buffer.alloc(16, 5).toString('base64');
    const msg2 = problem({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: short });
    expect(msg2).toContain('KEY_ENCRYPTION_KEY_PREVIOUS: key 1 must be base64 of exactly 32 bytes (it decodes to 16)');
    expect(msg2).not.toContain(short);
    expect(problem({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: Buffer.alloc(33, 5).toString('base64') })).toMatch(/key 1 must be base64 of exactly 32 bytes/);
  });

  it('refuses the current key itself and a repeated entry', () => {
    expect(problem({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: `${a},${current}` })).toContain('KEY_ENCRYPTION_KEY_PREVIOUS: key 2 is KEY_ENCRYPTION_KEY itself');
    // the same key in another spelling (URL-safe, unpadded) is the same key
    expect(problem({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: Buffer.alloc(32, 1).toString('base64url') })).toContain('key 1 is KEY_ENCRYPTION_KEY itself');
    expect(problem({ KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: `${a},${b},${a}` })).toContain('KEY_ENCRYPTION_KEY_PREVIOUS: key 3 repeats an earlier entry');
  });

  it('production refuses the development key there; development accepts it (a rotation away from it)', () => {
    expect(problem({ ...prod, KEY_ENCRYPTION_KEY_PREVIOUS: `${a},${DEV_KEY_ENCRYPTION_KEY}` })).toContain('KEY_ENCRYPTION_KEY_PREVIOUS: key 2 is the development key, refused in production');
    expect(loadConfig({ NODE_ENV: 'development', KEY_ENCRYPTION_KEY: current, KEY_ENCRYPTION_KEY_PREVIOUS: DEV_KEY_ENCRYPTION_KEY }).previousKeyEncryptionKeys).toEqual([Buffer.from(DEV_KEY_ENCRYPTION_KEY, 'base64')]);
  });
});
