import { ChildProcess, spawn } from 'child_process';
import { join } from 'path';
import { AddressInfo, connect, Socket } from 'net';
import { createTestApp, randomIp, TestApp } from '../../setup/app';

/**
 * Shutdown (SIGTERM runs the same app.close()): a keep-alive client, such as a load balancer's
 * connection pool, must not hold the process open until keepAliveTimeout (72 s). A request in
 * flight when the shutdown begins gets its normal answer with `Connection: close`, and the server
 * ends that connection; idle keep-alive connections are closed at once.
 */

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Reads the next HTTP/1.1 response (with Content-Length) from a raw socket. */
function nextResponse(socket: Socket, timeoutMs = 10_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const done = (err: Error | null, res?: RawResponse) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve(res!);
    };
    const onClose = () => done(new Error(`socket closed before a whole response (${JSON.stringify(buf.toString('latin1'))})`));
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const i = line.indexOf(':');
        headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (buf.length < end + 4 + length) return;
      done(null, { status: Number(statusLine.split(' ')[1]), headers, body: buf.subarray(end + 4, end + 4 + length).toString('utf8') });
    };
    const timer = setTimeout(() => done(new Error(`no whole response within ${timeoutMs} ms`)), timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

/** Resolves true once the peer closed the socket, false if it is still open after `ms`. */
function closedWithin(socket: Socket, ms: number): Promise<boolean> {
  if (socket.destroyed || socket.readableEnded) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      resolve(false);
    }, ms);
    const onEnd = () => {
      clearTimeout(timer);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      resolve(true);
    };
    socket.once('end', onEnd);
    socket.once('close', onEnd);
  });
}

/** Resolves true if the promise settled within `ms`. */
function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
  ]).finally(() => clearTimeout(timer));
}

function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/**
 * The API in a child process, as `node dist/main` runs it (one process) but from the sources: the
 * TypeScript compiler's transpileModule (as ts-jest with isolatedModules) on require. Prints its port.
 */
const CHILD = `
const fs = require('fs');
const ts = require('typescript');
const options = { ...ts.parseJsonConfigFileContent(ts.readConfigFile('tsconfig.json', ts.sys.readFile).config, ts.sys, '.').options, sourceMap: false, inlineSourceMap: false };
require.extensions['.ts'] = (m, file) => m._compile(ts.transpileModule(fs.readFileSync(file, 'utf8'), { compilerOptions: options, fileName: file }).outputText, file);
require('./src/app.factory').createApiApp({ logger: false })
  .then(async (app) => { await app.listen({ port: 0, host: '127.0.0.1' }); process.stdout.write('PORT ' + app.getHttpServer().address().port + '\\n'); })
  .catch((err) => { console.error(err); process.exit(1); });
`;

function startApiProcess(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['-e', CHILD], { cwd: join(__dirname, '../../..'), env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the API process did not start: ${err}`));
    }, 60_000);
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /PORT (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]) });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the API process exited (${code}) before listening: ${err}`));
    });
  });
}

function exitedWithin(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

describe('shutdown with keep-alive clients (platform)', () => {
  let t: TestApp | undefined;
  const sockets: Socket[] = [];

  afterEach(async () => {
    // a failing run leaves no connection nor app behind (the server would wait on the sockets)
    for (const s of sockets.splice(0)) s.destroy();
    await t?.close().catch(() => undefined);
    t = undefined;
  });

  it('a request in flight when the shutdown begins is answered normally with Connection: close, the server ends its connection and an idle one, and close() does not wait for keepAliveTimeout', async () => {
    t = await createTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (t.app.getHttpServer().address() as AddressInfo).port;
    const body = '{}';
    const head = `POST /v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n`;

    const busy = await openSocket(port);
    const idle = await openSocket(port);
    sockets.push(busy, idle);
    busy.on('error', () => undefined);
    idle.on('error', () => undefined);

    // before the shutdown: ordinary keep-alive answers on both connections
    idle.write(`${head}X-Forwarded-For: ${randomIp()}\r\n\r\n${body}`);
    const before = await nextResponse(idle);
    expect(before.headers.connection).toBe('keep-alive');
    busy.write(`${head}X-Forwarded-For: ${randomIp()}\r\n\r\n${body}`);
    const first = await nextResponse(busy);
    expect(first.headers.connection).toBe('keep-alive');
    expect(first.status).toBe(before.status);

    // a request in flight: its headers are in, its body not yet
    const ip = randomIp();
    busy.write(`${head}X-Forwarded-For: ${ip}\r\n\r\n`);
    await new Promise((r) => setTimeout(r, 200));

    const started = Date.now();
    const closing = t.close();
    closing.catch(() => undefined);

    // the idle keep-alive connection is closed at once
    expect(await closedWithin(idle, 2_000)).toBe(true);

    // the request in flight completes normally (not 503, not reset), saying Connection: close
    const answered = nextResponse(busy);
    busy.write(body);
    const last = await answered;
    expect(last.status).toBe(first.status);
    expect(JSON.parse(last.body)).toMatchObject({ code: JSON.parse(first.body).code });
    expect(last.headers.connection).toBe('close');
    // and the server closes that connection promptly instead of keeping it for 72 s
    expect(await closedWithin(busy, 2_000)).toBe(true);

    // close() resolves well before keepAliveTimeout (72 s)
    expect(await settlesWithin(closing, 10_000)).toBe(true);
    await closing;
    expect(Date.now() - started).toBeLessThan(10_000);
    t = undefined;
  });

  it('a request whose headers complete after the shutdown began (its connection busy) is served as the ones in flight: its normal answer in the envelope, with X-Request-Id and the usual headers, Connection: close', async () => {
    t = await createTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (t.app.getHttpServer().address() as AddressInfo).port;
    const busy = await openSocket(port);
    sockets.push(busy);
    busy.on('error', () => undefined);
    // the request line and part of its headers: the connection is busy (not closed as idle)
    busy.write(`GET /v1/auth/me HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: ${randomIp()}\r\n`);
    await new Promise((r) => setTimeout(r, 200));
    const closing = t.close();
    closing.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    const answered = nextResponse(busy);
    busy.write('X-Request-Id: shutdown-late-headers\r\n\r\n');
    const res = await answered;
    // no bearer: the endpoint's own 401 (Fastify's bare 503 fast path answered before)
    expect(res.status).toBe(401);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(res.body)).toMatchObject({ status: 401, code: expect.any(String) });
    expect(res.headers['x-request-id']).toBe('shutdown-late-headers');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers.connection).toBe('close');
    expect(await settlesWithin(closing, 10_000)).toBe(true);
    await closing;
    t = undefined;
  });

  it('SIGTERM to an API process: a request in flight is answered with Connection: close, and the process exits in seconds, not after keepAliveTimeout', async () => {
    const { child, port } = await startApiProcess();
    try {
      const busy = await openSocket(port);
      sockets.push(busy);
      busy.on('error', () => undefined);
      const body = '{}';
      const head = `POST /v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nX-Forwarded-For: ${randomIp()}\r\n\r\n`;
      busy.write(head + body);
      const first = await nextResponse(busy);
      expect(first.headers.connection).toBe('keep-alive');

      busy.write(head);
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 200));
      const answered = nextResponse(busy);
      busy.write(body);
      const last = await answered;
      expect(last.status).toBe(first.status);
      expect(last.headers.connection).toBe('close');
      expect(await closedWithin(busy, 2_000)).toBe(true);
      expect(await exitedWithin(child, 10_000)).toBe(true);
      expect(Date.now() - started).toBeLessThan(10_000);
      // Nest's shutdown hooks re-raised the signal: no exit on the deadline
      expect(child.signalCode).toBe('SIGTERM');
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exitedWithin(child, 5_000);
      }
    }
  }, 90_000);
});
