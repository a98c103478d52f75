import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installCpuProfileToggle } from './cpu-profile';

describe('installCpuProfileToggle', () => {
  it('is off without a folder: SIGUSR2 has no listener of its own', () => {
    const before = process.listenerCount('SIGUSR2');
    installCpuProfileToggle('');
    expect(process.listenerCount('SIGUSR2')).toBe(before);
  });

  it('starts a profile on one SIGUSR2 and writes it on the next', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cpu-profile-'));
    try {
      installCpuProfileToggle(dir);
      process.emit('SIGUSR2', 'SIGUSR2');
      const until = Date.now() + 50;
      while (Date.now() < until) Math.sqrt(Math.random()); // something to sample
      await new Promise((r) => setTimeout(r, 20));
      expect(readdirSync(dir)).toEqual([]);
      process.emit('SIGUSR2', 'SIGUSR2');
      for (let i = 0; i < 100 && !readdirSync(dir).length; i++) await new Promise((r) => setTimeout(r, 20));
      const files = readdirSync(dir);
      expect(files).toEqual([`${process.pid}-1.cpuprofile`]);
      const profile = JSON.parse(readFileSync(join(dir, files[0]), 'utf8')) as { nodes: unknown[]; samples: unknown[] };
      expect(profile.nodes.length).toBeGreaterThan(1);
    } finally {
      process.removeAllListeners('SIGUSR2');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
