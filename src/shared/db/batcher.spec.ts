import { Batcher } from './batcher';

/** A gate the test opens by hand: statements "in flight" until then. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

describe('Batcher', () => {
  it('runs a lone call at once, alone; calls that arrive while the slots are busy go together, in order', async () => {
    const g = gate();
    const calls: string[] = [];
    const b = new Batcher<number, number>(
      async (xs) => {
        calls.push(`batch ${xs.join(',')}`);
        return xs.map((x) => x * 10);
      },
      async (x) => {
        calls.push(`one ${x}`);
        await g.opened;
        return x * 10;
      },
      { name: 'test_order', maxBatch: 3, maxInFlight: 1 },
    );
    const first = b.submit(1);
    const rest = [2, 3, 4, 5, 6].map((x) => b.submit(x));
    expect(calls).toEqual(['one 1']);
    g.open();
    expect(await Promise.all([first, ...rest])).toEqual([10, 20, 30, 40, 50, 60]);
    // 5 queued, at most 3 per statement: one batch of three, then one of two
    expect(calls).toEqual(['one 1', 'batch 2,3,4', 'batch 5,6']);
  });

  it('retries each item of a failed batch alone: only the bad item fails, with its own error', async () => {
    const g = gate();
    const b = new Batcher<number, number>(
      async () => {
        throw new Error('batch failed');
      },
      async (x) => {
        await g.opened;
        if (x === 3) throw new Error('bad item 3');
        return x;
      },
      { name: 'test_retry', maxBatch: 10, maxInFlight: 1 },
    );
    const all = [1, 2, 3, 4].map((x) => b.submit(x).then((v) => ({ v }), (e: Error) => ({ e: e.message })));
    g.open();
    expect(await Promise.all(all)).toEqual([{ v: 1 }, { v: 2 }, { e: 'bad item 3' }, { v: 4 }]);
  });

  it('keeps at most maxInFlight statements running', async () => {
    let running = 0;
    let peak = 0;
    const work = async <T>(v: T): Promise<T> => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 5));
      running--;
      return v;
    };
    const b = new Batcher<number, number>((xs) => work(xs), (x) => work(x), { name: 'test_inflight', maxBatch: 2, maxInFlight: 2 });
    expect(await Promise.all(Array.from({ length: 20 }, (_, i) => b.submit(i)))).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(peak).toBe(2);
  });
});
