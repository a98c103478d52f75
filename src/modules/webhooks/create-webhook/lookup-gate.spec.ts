import { LookupGate } from './lookup-gate';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('LookupGate', () => {
  it('runs at most perKey tasks per key; the next waits for a turn; other keys are not held up', async () => {
    const gate = new LookupGate(2);
    let peak = 0;
    let now = 0;
    const task = async () => {
      peak = Math.max(peak, ++now);
      await sleep(100);
      now--;
      return 'done';
    };
    const expired = () => 'expired';
    const started = Date.now();
    const a = Promise.all([1, 2, 3].map(() => gate.run('t1', 1000, task, expired)));
    const other = await gate.run('t2', 1000, async () => Date.now() - started, () => -1);
    expect(other).toBeLessThan(50);
    expect(await a).toEqual(['done', 'done', 'done']);
    expect(peak).toBe(2);
    expect(gate.running('t1')).toBe(0);
  });

  it('a task whose turn does not come within its budget is not run', async () => {
    const gate = new LookupGate(1);
    const hold = gate.run('t', 1000, () => sleep(400).then(() => 'held'), () => 'expired');
    let ran = false;
    const waited = await gate.run<string>('t', 150, async () => String((ran = true)), () => 'expired');
    expect(waited).toBe('expired');
    expect(ran).toBe(false);
    expect(await hold).toBe('held');
    expect(gate.running('t')).toBe(0);
  });

  it('hands the task what is left of its budget after waiting', async () => {
    const gate = new LookupGate(1);
    const hold = gate.run('t', 1000, () => sleep(200), () => undefined);
    const left = await gate.run('t', 1000, async (ms) => ms, () => -1);
    await hold;
    expect(left).toBeGreaterThan(700);
    expect(left).toBeLessThanOrEqual(810);
  });
});
