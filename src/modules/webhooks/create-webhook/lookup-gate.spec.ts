import { LookupGate } from './lookup-gate';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A gate the test opens by hand: tasks stay "in flight" until then, however slow the machine. */
function barrier() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

describe('LookupGate', () => {
  afterEach(() => jest.useRealTimers());

  it('runs at most perKey tasks per key; the next waits for a turn; other keys are not held up', async () => {
    const gate = new LookupGate(2);
    const release = barrier();
    const started: number[] = [];
    let peak = 0;
    let now = 0;
    const task = (i: number) => async () => {
      started.push(i);
      peak = Math.max(peak, ++now);
      await release.opened;
      now--;
      return 'done';
    };
    const expired = () => 'expired';
    const a = Promise.all([1, 2, 3].map((i) => gate.run('t1', 10_000, task(i), expired)));
    // t1's first two hold their turns (held until the test opens the barrier); the third waits
    expect(started).toEqual([1, 2]);
    expect(gate.running('t1')).toBe(2);
    // another key runs and ends while t1's two are still held and its third still waits (held up
    // behind t1, it would get its turn only after the barrier opens, or expire: 'expired')
    const other = await gate.run<object | string>('t2', 2000, async () => ({ t1Started: [...started], t1Running: gate.running('t1') }), () => 'expired');
    expect(other).toEqual({ t1Started: [1, 2], t1Running: 2 });
    release.open();
    expect(await a).toEqual(['done', 'done', 'done']);
    expect(started).toEqual([1, 2, 3]);
    expect(peak).toBe(2);
    expect(gate.running('t1')).toBe(0);
  });

  it('a task whose turn does not come within its budget is not run', async () => {
    jest.useFakeTimers();
    const gate = new LookupGate(1);
    const hold = gate.run('t', 1000, () => sleep(400).then(() => 'held'), () => 'expired');
    let ran = false;
    let waited: string | undefined;
    void gate.run<string>('t', 150, async () => String((ran = true)), () => 'expired').then((v) => (waited = v));
    await jest.advanceTimersByTimeAsync(149);
    expect(waited).toBeUndefined(); // still waiting for its turn
    await jest.advanceTimersByTimeAsync(1);
    // its budget is up while the first still runs: expired, never started
    expect(waited).toBe('expired');
    expect(ran).toBe(false);
    await jest.advanceTimersByTimeAsync(250);
    expect(await hold).toBe('held');
    expect(ran).toBe(false); // the turn the first hands over does not go to the expired one
    expect(gate.running('t')).toBe(0);
  });

  it('hands the task what is left of its budget after waiting', async () => {
    jest.useFakeTimers();
    const gate = new LookupGate(1);
    const hold = gate.run('t', 1000, () => sleep(200), () => undefined);
    const left = gate.run('t', 1000, async (ms) => ms, () => -1);
    await jest.advanceTimersByTimeAsync(200);
    await hold;
    // 1000 ms budget, 200 ms of it spent waiting for the turn
    expect(await left).toBe(800);
  });
});
