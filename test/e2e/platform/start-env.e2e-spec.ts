import { spawnSync } from 'child_process';
import { randomBytes } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as dotenv from 'dotenv';

const ROOT = path.resolve(__dirname, '../../..');

/**
 * `npm start` writes a fresh KEY_ENCRYPTION_KEY into `.env` when it has none. It must see one
 * written in any spelling its loader (bash `.`) and dotenv read, else the fresh key, a later line,
 * wins over the operator's and nothing encrypted under it opens again; and its line must be a line
 * of its own. scripts/start.sh runs in a copy with `npm` stubbed (no install, no build: the API
 * then fails to start, which does not matter here); only `.env` is read afterwards.
 */
describe('npm start and the KEY_ENCRYPTION_KEY of .env', () => {
  /**
   * The env files after scripts/start.sh ran with `.env` holding `before` (null: none), in the
   * environment `env` (DOTENV_PATH relative to the copy); `after[name]` is null for a file absent.
   */
  function afterStart(before: string | null, env: Record<string, string> = {}, files = ['.env']): Record<string, string | null> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authp-start-'));
    try {
      fs.mkdirSync(path.join(dir, 'scripts'));
      for (const f of ['start.sh', 'lib.sh']) fs.copyFileSync(path.join(ROOT, 'scripts', f), path.join(dir, 'scripts', f));
      fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
      fs.mkdirSync(path.join(dir, 'bin'));
      fs.writeFileSync(path.join(dir, 'bin', 'npm'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
      if (before !== null) {
        fs.mkdirSync(path.dirname(path.join(dir, files[0])), { recursive: true });
        fs.writeFileSync(path.join(dir, files[0]), before);
      }
      spawnSync('bash', ['scripts/start.sh'], {
        cwd: dir,
        env: { PATH: `${path.join(dir, 'bin')}:${process.env.PATH}`, HOME: dir, REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', ...env },
        encoding: 'utf8',
        timeout: 60_000,
      });
      return Object.fromEntries(files.map((f) => [f, fs.existsSync(path.join(dir, f)) ? fs.readFileSync(path.join(dir, f), 'utf8') : null]));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  it.each(['KEY_ENCRYPTION_KEY=', 'export KEY_ENCRYPTION_KEY=', '  KEY_ENCRYPTION_KEY='])('keeps the key of a line "%s..."', (prefix) => {
    const key = randomBytes(32).toString('base64');
    const before = `LOG_LEVEL=warn\n${prefix}${key}\n`;
    expect(dotenv.parse(before).KEY_ENCRYPTION_KEY).toBe(key);
    expect(afterStart(before)['.env']).toBe(before);
  }, 90_000);

  it('adds a key, on a line of its own, to a .env without one (also when its last line has no newline)', () => {
    for (const before of ['LOG_LEVEL=warn\n', 'LOG_LEVEL=warn']) {
      const after = dotenv.parse(afterStart(before)['.env']!);
      expect(after.LOG_LEVEL).toBe('warn');
      expect(Buffer.from(after.KEY_ENCRYPTION_KEY, 'base64')).toHaveLength(32);
    }
  }, 90_000);

  it("uses DOTENV_PATH's file, as the service does: its key is kept and no ./.env with another is written; a key set in the environment writes nothing", () => {
    const key = randomBytes(32).toString('base64');
    const before = `KEY_ENCRYPTION_KEY=${key}\n`;
    expect(afterStart(before, { DOTENV_PATH: 'conf/authp.env' }, ['conf/authp.env', '.env'])).toEqual({ 'conf/authp.env': before, '.env': null });
    expect(afterStart(null, { KEY_ENCRYPTION_KEY: key })).toEqual({ '.env': null });
  }, 90_000);
});
