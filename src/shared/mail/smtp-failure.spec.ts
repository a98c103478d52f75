import { withoutAddress } from './mail.processor';

describe('withoutAddress (a retried SMTP failure as BullMQ keeps it)', () => {
  const to = 'jöhn@bücher.example';

  it("keeps no word of a server's reply, whatever form it quotes the recipient in: its codes only", () => {
    for (const reply of ['451 4.3.2 <jöhn@xn--bcher-kva.example>: try again later', '450 4.2.0 <jÃ¶hn@bÃ¼cher.example> greylisted', '421 service not available']) {
      const err = Object.assign(new Error(`Can't send mail - all recipients were rejected: ${reply}`), { responseCode: Number(reply.slice(0, 3)), code: 'EENVELOPE' });
      const out = withoutAddress(err, to) as Error;
      expect(out).toBeInstanceOf(Error);
      expect(out.message).not.toMatch(/@|j.hn|greylisted|try again/);
      expect(out.message).toContain(`${reply.slice(0, 3)}`);
    }
    const enhanced = withoutAddress(Object.assign(new Error('451 4.3.2 <x@y.example> later'), { responseCode: 451, code: 'EENVELOPE' }), to) as Error;
    expect(enhanced.message).toBe("SMTP refused for now: 451 4.3.2 (EENVELOPE); the server's reply is not kept (it may quote the recipient)");
  });

  it('a failure without a reply (connection refused, a timeout) keeps its text, any address in it replaced', () => {
    const plain = new Error('connect ECONNREFUSED 127.0.0.1:25');
    expect(withoutAddress(plain, to)).toBe(plain);
    const named = withoutAddress(new Error(`Invalid recipient ${JSON.stringify(to)} (other@example.com)`), to) as Error;
    expect(named.message).toBe('Invalid recipient "<recipient>" (<address>)');
    expect(withoutAddress('not an error', to)).toBe('not an error');
  });
});
