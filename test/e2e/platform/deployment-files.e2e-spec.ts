import { spawn, spawnSync } from 'child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { load } from 'js-yaml';

const root = join(__dirname, '../../..');
const read = (file: string): string => readFileSync(join(root, file), 'utf8');

/** Applies YAML merge keys (`<<: *anchor`, as compose does; js-yaml 5 leaves them as a `<<` property). */
const merged = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(merged);
  if (value === null || typeof value !== 'object') return value;
  const { '<<': base, ...own } = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const b of base === undefined ? [] : Array.isArray(base) ? base : [base]) Object.assign(out, merged(b));
  for (const [k, v] of Object.entries(own)) out[k] = merged(v);
  return out;
};

interface ComposeService {
  command?: string[];
  environment?: Record<string, string>;
}

/** The files an operator runs without the test suite: docker/compose.yaml and npm start's supervision. */
describe('deployment files', () => {
  it('docker/compose.yaml is valid YAML with the five services, each process its entry point and the required variables checked', () => {
    const doc = merged(load(read('docker/compose.yaml'))) as { services: Record<string, ComposeService> };
    expect(Object.keys(doc.services).sort()).toEqual(['api', 'migrate', 'postgres', 'redis', 'worker']);
    expect(doc.services.migrate.command).toEqual(['node', 'dist/migrate']);
    expect(doc.services.api.command).toEqual(['node', 'dist/main']);
    expect(doc.services.worker.command).toEqual(['node', 'dist/worker']);
    // the README's list of what compose requires: each a ${VAR:?message} in every process's environment
    const required = ['PUBLIC_BASE_URL', 'ACCOUNTS_URL', 'SMTP_URL', 'EMAIL_FROM', 'KEY_ENCRYPTION_KEY'];
    for (const name of ['migrate', 'api', 'worker']) {
      const env = doc.services[name].environment ?? {};
      for (const v of required) expect(env[v]).toMatch(new RegExp(`^\\$\\{${v}:\\?[^}]+\\}$`));
    }
    expect(read('README.md').replace(/\s+/g, ' ')).toContain('compose requires `SMTP_URL`, `EMAIL_FROM`, `PUBLIC_BASE_URL`, `ACCOUNTS_URL` and `KEY_ENCRYPTION_KEY`');
    expect(read('.env.example').replace(/\s+/g, ' ')).toContain('requires SMTP_URL, EMAIL_FROM, PUBLIC_BASE_URL, ACCOUNTS_URL and KEY_ENCRYPTION_KEY');
  });

  describe('npm start runs the API and the worker as a pair (scripts/lib.sh run_pair)', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'authp-run-pair-'));
      writeFileSync(join(dir, 'exit3.sh'), 'sleep 0.3; exit 3\n');
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    // the sleep itself, not the bash command line that names it
    const alive = (marker: string): boolean => spawnSync('pgrep', ['-f', `^${marker.replace('.', '\\.')}$`]).status === 0;
    const pair = (a: string, b: string) =>
      spawn('bash', ['-c', `set -euo pipefail; . scripts/lib.sh; run_pair "${a}" "${b}"; echo after`], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = (p: ReturnType<typeof spawn>): Promise<{ code: number | null; out: string }> =>
      new Promise((resolve) => {
        let out = '';
        p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
        p.on('exit', (code) => resolve({ code, out }));
      });

    it('when one exits by itself (a crashed API), the other is stopped and the script exits with the first one\'s status', async () => {
      const marker = `sleep 41.${process.pid}`;
      const { code, out } = await exited(pair(marker, `bash ${join(dir, 'exit3.sh')}`));
      expect(code).toBe(3);
      expect(out).not.toContain('after'); // set -e: npm start fails with it
      expect(alive(marker)).toBe(false);
    });

    it('SIGTERM to the script stops both', async () => {
      const [m1, m2] = [`sleep 42.${process.pid}`, `sleep 43.${process.pid}`];
      const p = pair(m1, m2);
      const done = exited(p);
      for (let i = 0; i < 50 && !(alive(m1) && alive(m2)); i++) await new Promise((r) => setTimeout(r, 100));
      expect(alive(m1) && alive(m2)).toBe(true);
      p.kill('SIGTERM');
      expect((await done).code).toBe(143);
      expect(alive(m1) || alive(m2)).toBe(false);
    });
  });
});
