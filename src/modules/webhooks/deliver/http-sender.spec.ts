import { createServer, IncomingHttpHeaders, Server } from 'http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'net';
import { postWebhook } from './http-sender';

const prod = { allowLoopback: false };
const dev = { allowLoopback: true };

describe('postWebhook', () => {
  let server: Server;
  let port: number;
  let seen: { headers: IncomingHttpHeaders; body: string }[];
  let reply: (res: import('http').ServerResponse) => void;

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen.push({ headers: req.headers, body });
        reply(res);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  beforeEach(() => {
    seen = [];
    reply = (res) => res.writeHead(204).end();
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('POSTs the JSON body with the given headers; 2xx is a delivery', async () => {
    const r = await postWebhook(`http://127.0.0.1:${port}/in`, '{"a":1}', { 'webhook-id': 'msg_1' }, { timeoutMs: 2000, policy: dev });
    expect(r).toEqual({ ok: true, statusCode: 204, error: null });
    expect(seen[0].body).toBe('{"a":1}');
    expect(seen[0].headers).toMatchObject({ 'content-type': 'application/json', 'content-length': '7', 'webhook-id': 'msg_1', 'user-agent': 'authp-webhooks/1.0' });
  });

  it('treats other statuses, redirects included, as failures without following them', async () => {
    reply = (res) => res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end();
    expect(await postWebhook(`http://127.0.0.1:${port}/in`, '{}', {}, { timeoutMs: 2000, policy: dev })).toEqual({ ok: false, statusCode: 302, error: 'HTTP 302' });
    expect(seen).toHaveLength(1);
  });

  it('times out, and describes network errors without addresses', async () => {
    reply = () => undefined; // never answers
    expect(await postWebhook(`http://127.0.0.1:${port}/in`, '{}', {}, { timeoutMs: 200, policy: dev })).toEqual({ ok: false, statusCode: null, error: 'timeout after 200 ms' });
    const refused = await postWebhook('http://127.0.0.1:1/in', '{}', {}, { timeoutMs: 2000, policy: dev });
    expect(refused).toEqual({ ok: false, statusCode: null, error: 'connection refused' });
  });

  it('connects to the address it checked (no second resolution) and refuses hosts resolving to forbidden addresses', async () => {
    const loopback = async () => [{ address: '127.0.0.1', family: 4 }];
    // the name resolves once, to the checked address, and the request goes there
    const ok = await postWebhook(`http://hooks.example.test:${port}/in`, '{}', {}, { timeoutMs: 2000, policy: dev, lookupAll: loopback });
    expect(ok.ok).toBe(true);
    expect(seen[0].headers.host).toBe(`hooks.example.test:${port}`);
    // production: loopback refused, also behind a public-looking name, and http refused outright
    const blocked = await postWebhook(`https://hooks.example.test:${port}/in`, '{}', {}, { timeoutMs: 2000, policy: prod, lookupAll: loopback });
    expect(blocked).toEqual({ ok: false, statusCode: null, error: 'url host does not resolve to a public address' });
    const mixed = async () => [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.1', family: 4 }];
    expect((await postWebhook('https://hooks.example.test/in', '{}', {}, { timeoutMs: 2000, policy: prod, lookupAll: mixed })).error).toBe('url host does not resolve to a public address');
    expect((await postWebhook(`https://127.0.0.1:${port}/in`, '{}', {}, { timeoutMs: 2000, policy: prod })).error).toMatch(/^url must not resolve/);
    expect((await postWebhook(`http://127.0.0.1:${port}/in`, '{}', {}, { timeoutMs: 2000, policy: prod })).error).toBe('url must use https');
    expect(seen).toHaveLength(1);
  });

  it('settles on a 101 Switching Protocols or a socket closed before any answer, never hanging past the attempt', async () => {
    // a raw TCP receiver: Node emits neither 'response' nor 'error' for a 101 it did not ask for
    const sockets: Socket[] = [];
    let answer = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n';
    const raw = createTcpServer((sock) => {
      sockets.push(sock);
      sock.once('data', () => (answer ? sock.write(answer) : sock.end()));
    });
    await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
    const rawPort = (raw.address() as AddressInfo).port;
    try {
      // the attempt's timeout is long: the result must come from the answer, not from the timer
      const settled = async (p: Promise<unknown>) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          return await Promise.race([p, new Promise((r) => (timer = setTimeout(() => r('hung'), 3000)))]);
        } finally {
          clearTimeout(timer);
        }
      };
      expect(await settled(postWebhook(`http://127.0.0.1:${rawPort}/in`, '{}', {}, { timeoutMs: 10_000, policy: dev }))).toEqual({ ok: false, statusCode: 101, error: 'HTTP 101' });
      answer = '';
      expect(await settled(postWebhook(`http://127.0.0.1:${rawPort}/in`, '{}', {}, { timeoutMs: 10_000, policy: dev }))).toEqual({ ok: false, statusCode: null, error: 'connection reset' });
    } finally {
      sockets.forEach((s) => s.destroy());
      await new Promise((r) => raw.close(r));
    }
  });
});
