import { randomUUID } from 'crypto';
import fastifyCookie from '@fastify/cookie';
import fastifyCors from '@fastify/cors';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import helmet, { HelmetOptions } from 'helmet';
import { Logger } from 'nestjs-pino';
import { ApiModule } from './api.module';
import { AppConfig } from './config/config';
import { getConfig } from './config/config.module';
import { assertRedisDatabase, closeRedisIfBootFails } from './shared/redis/redis.module';
import { EnvelopeCipher } from './shared/crypto/envelope-cipher';
import { setCursorKey } from './shared/db/pagination';
import { AppError } from './shared/errors/app-error';
import { renderError, sendRendered } from './shared/errors/problem';
import { createValidationPipe } from './shared/errors/validation.pipe';
import { installBodyParsers } from './shared/http/body-parsers';
import { installPublicPreflight } from './shared/http/public-cors';
import { countUnparsed, installMetrics } from './shared/http/metrics';
import { linkRequestForLogs, requestLogsEnabled } from './shared/http/logger';
import { DASHBOARD_COOKIE } from './shared/auth/dashboard-session.service';
import { closeRequestSchemas, csrfOnWrites, declareLongPathRefusals, declareBodyRefusals, OAUTH_CLIENT_BASIC } from './shared/http/api-docs';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** 127.0.0.0/8 and ::1 (also IPv4-mapped): the common `loopback` setting without parsing addresses per request. */
function isLoopback(addr: string): boolean {
  return addr === '::1' || addr.startsWith('127.') || addr.startsWith('::ffff:127.');
}

function trustProxy(value: string): boolean | string | ((addr: string) => boolean) {
  if (value === 'loopback') return isLoopback;
  if (value === 'true') return true;
  if (value === 'false' || value === '') return false;
  return value; // addresses or CIDRs, comma-separated (a hop count is refused by the config)
}

/** Connections whose parser refusal waits for the answer to an earlier request (answerClientError). */
const refusalWaiting = new WeakSet<import('net').Socket>();

/**
 * A request Node's HTTP parser refuses (a control character in a header, headers too large, a
 * malformed request line) never reaches Fastify's routing: answer it in the one error envelope
 * anyway, with its own X-Request-Id, and close the connection. Counted in http_requests_total
 * with route `unparsed` (countUnparsed), as are the other answers made before Fastify (below).
 */
function answerClientError(err: NodeJS.ErrnoException, socket: import('net').Socket, baseHeaders: Record<string, string>): void {
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  // its refusal already waits (below): Node reports a client error again for every chunk that
  // follows on the connection, and one answer is owed, not a pair of listeners per chunk
  if (refusalWaiting.has(socket)) return;
  // an earlier request of the connection (pipelined, received whole) is still being answered: its
  // answer goes first (RFC 9112 section 9.3.2), then this one; written now, the 400 read as that
  // request's. (The answer owed to a request still arriving, a body cut short or too slow, is this.)
  const owed = (socket as { _httpMessage?: import('http').ServerResponse | null })._httpMessage;
  if (owed && !owed.writableFinished && owed.req?.complete) {
    refusalWaiting.add(socket);
    owed.once('finish', () => {
      refusalWaiting.delete(socket);
      answerClientError(err, socket, baseHeaders);
    });
    owed.once('close', () => !owed.writableFinished && socket.destroy());
    return;
  }
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const reason = status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request';
  const id = randomUUID();
  // the path of the request line when the parser's packet holds it: an /oauth request gets the
  // RFC 6749 envelope there too
  const path = /^[A-Z]+ (\/[^\s?#]*)/.exec((err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 2048).toString('latin1') ?? '')?.[1] ?? '/';
  const error =
    status === 431 ? new AppError('request/headers_too_large', 'The request headers are too large')
      : status === 408 ? new AppError('request/timeout', 'The request did not arrive in time')
        : new AppError('request/invalid', 'The HTTP request could not be parsed');
  const rendered = renderError(error, path, id);
  const body = JSON.stringify(rendered.body);
  const headers = Object.entries({ ...baseHeaders, ...(rendered.headers ?? {}) }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  countUnparsed(/^([A-Z]+) /.exec((err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 32).toString('latin1') ?? '')?.[1], status);
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: ${rendered.contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers}` +
      `X-Request-Id: ${id}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** `Expect:` other than 100-continue (RFC 9110 section 10.1.1): 417 in the one error envelope. */
function answerUnmetExpectation(req: import('http').IncomingMessage, res: import('http').ServerResponse, baseHeaders: Record<string, string>): void {
  answerOutsideFastify(req, res, new AppError('request/expectation_failed', 'Only Expect: 100-continue is supported'), baseHeaders);
}

/**
 * CONNECT (a proxy's tunnel, which this service is not): 405 with Allow in the one error envelope,
 * then the connection closes (Node would otherwise drop it without a word).
 */
function answerConnect(req: import('http').IncomingMessage, socket: import('stream').Duplex, baseHeaders: Record<string, string>): void {
  const id = randomUUID();
  const rendered = renderError(new AppError('request/method_not_allowed', 'CONNECT is not supported'), originForm(req.url ?? '/'), id);
  const body = JSON.stringify(rendered.body);
  const headers = Object.entries({ ...baseHeaders, ...(rendered.headers ?? {}), Allow: 'GET, HEAD, POST, PUT, PATCH, DELETE' }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  countUnparsed('CONNECT', 405);
  socket.end(`HTTP/1.1 405 Method Not Allowed\r\nContent-Type: ${rendered.contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers}X-Request-Id: ${id}\r\nConnection: close\r\n\r\n${body}`);
}

/** An error answered by Node's server before Fastify sees the request, with the headers every answer carries. */
function answerOutsideFastify(req: import('http').IncomingMessage, res: import('http').ServerResponse, err: AppError, baseHeaders: Record<string, string>): void {
  const id = randomUUID();
  const rendered = renderError(err, originForm(req.url ?? '/'), id);
  const body = JSON.stringify(rendered.body);
  countUnparsed(req.method, rendered.status);
  res.writeHead(rendered.status, { ...baseHeaders, ...rendered.headers, 'Content-Type': rendered.contentType, 'Content-Length': Buffer.byteLength(body), 'X-Request-Id': id, Connection: 'close' });
  res.end(body);
}

/**
 * The origin form of a request target (RFC 9112 section 3.2): an absolute-form target
 * (`POST http://host/oauth/token`, which a server MUST accept) is read as its path and query, so
 * every check that looks at the path (the OAuth envelope and form parsers, the public documents'
 * CORS) sees the path the router matched.
 */
export function originForm(url: string): string {
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(url);
  if (!m) return url;
  const rest = url.slice(m[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

/** Beyond this after SIGTERM/SIGINT, an API process still closing exits anyway (as the worker; compose allows 30 s). */
const SHUTDOWN_TIMEOUT_MS = 25_000;

/**
 * Closing without waiting on keep-alive clients. Node's server.close() (Fastify's close) only ends
 * the connections idle at that moment: one busy then is kept open after its response (`Connection:
 * keep-alive`) until keepAliveTimeout (72 s) and holds the process, past Docker's 10 s or
 * Kubernetes's 30 s before SIGKILL. Once a shutdown begins (SIGTERM/SIGINT on a listening server,
 * else when app.close() reaches the HTTP server), every response still to be written says
 * `Connection: close` and its connection ends after it, idle keep-alive connections are closed at
 * once, and requests in flight finish normally. After a signal, a process still closing after
 * SHUTDOWN_TIMEOUT_MS exits anyway.
 */
function closeConnectionsOnShutdown(app: NestFastifyApplication): void {
  const server = app.getHttpServer() as import('http').Server;
  const fastify = app.getHttpAdapter().getInstance() as unknown as FastifyInstance;
  const open = new Set<import('http').ServerResponse>();
  let closing = false;
  // one listener for every response (no closure per request: this runs on every request)
  function onResponseClose(this: import('http').ServerResponse): void {
    open.delete(this);
    // a response whose headers (keep-alive) went out before the shutdown began: its connection
    // is idle once it is done
    if (closing) setImmediate(() => server.closeIdleConnections());
  }
  // before Fastify's own listener: set before any header of the response is written
  server.prependListener('request', (_req: import('http').IncomingMessage, res: import('http').ServerResponse) => {
    if (closing) res.setHeader('Connection', 'close');
    open.add(res);
    res.on('close', onResponseClose); // 'close' comes once: no once-wrapper needed
  });
  const signals = ['SIGTERM', 'SIGINT'] as const;
  const unsubscribe = (): void => {
    for (const sig of signals) process.removeListener(sig, onSignal);
  };
  const beginClosing = (): void => {
    unsubscribe();
    if (closing) return;
    closing = true;
    for (const res of open) if (!res.headersSent) res.setHeader('Connection', 'close');
    server.closeIdleConnections();
  };
  // a signal: at once, before Nest's shutdown hooks (onModuleDestroy, beforeApplicationShutdown)
  // that run before the HTTP server closes; the process exits after the deadline whatever holds it
  function onSignal(signal: NodeJS.Signals): void {
    beginClosing();
    setTimeout(() => {
      console.error(`api did not stop within ${SHUTDOWN_TIMEOUT_MS} ms of ${signal}; exiting`);
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS).unref();
  }
  // only while listening: no listener left behind by an app that never listened or has closed
  server.on('listening', () => {
    unsubscribe();
    if (!closing) for (const sig of signals) process.once(sig, onSignal);
  });
  server.on('close', unsubscribe);
  // app.close() (and the signal's own path): Fastify's close, before it ends the idle connections
  fastify.addHook('preClose', (done) => {
    beginClosing();
    done();
  });
}

let answered: { security: Record<string, string>; all: Record<string, string> } | undefined;

/**
 * What every answer carries, computed once: helmet's security headers, and with them
 * `Cache-Control: no-store` (`all`: for answers made before Fastify routes a request; routed ones
 * get it in the onSend hook unless the route set its own).
 */
function answeredHeaders(): { security: Record<string, string>; all: Record<string, string> } {
  if (!answered) {
    const security = helmetHeaders({
      contentSecurityPolicy: {
        directives: {
          defaultSrc: ["'self'"],
          scriptSrc: ["'self'", "'unsafe-inline'"],
          styleSrc: ["'self'", "'unsafe-inline'"],
          imgSrc: ["'self'", 'data:', 'https:'],
          // not helmet's default upgrade-insecure-requests: the API serves no mixed content, and
          // the docs page reached over http (a development host, an internal address) would have
          // its own scripts fetched over https, which fails: a blank /docs
          upgradeInsecureRequests: null,
        },
      },
    });
    answered = { security, all: { ...security, 'Cache-Control': 'no-store' } };
  }
  return answered;
}

/** Builds the API application (used by `node dist/main` and by the e2e tests). */
export async function createApiApp(opts: { logger?: boolean } = {}): Promise<NestFastifyApplication> {
  const config = getConfig();
  await assertRedisDatabase(config);
  const baseHeaders = answeredHeaders();
  const adapter = new FastifyAdapter({
    rewriteUrl: (req: import('http').IncomingMessage) => originForm(req.url ?? '/'),
    trustProxy: trustProxy(config.TRUST_PROXY),
    bodyLimit: config.BODY_LIMIT_BYTES,
    // the whole request must arrive within HTTP_REQUEST_TIMEOUT_MS (Fastify's default is no limit:
    // a client trickling a body could hold a connection for ever). Node's check only runs when the
    // server is constructed with the timeout (`http`), and Fastify assigns its own `requestTimeout`
    // to the server afterwards (0, off, unless given), hence both; open requests are checked every
    // connectionsCheckingInterval, a quarter of the timeout
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    // a request whose headers complete after the shutdown began (its connection was busy, so not
    // closed as idle) is served as the ones in flight are, with Connection: close; Fastify's own
    // fast path answered it a bare 503 outside the envelope, without X-Request-Id or the headers
    return503OnClosing: false,
    http: {
      // HTTP/1.1 without Host: Node's own bare 400 otherwise; Fastify answers it in the envelope
      requireHostHeader: false,
      requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(config.HTTP_REQUEST_TIMEOUT_MS / 4))),
    },
    // a long path segment reaches the route's own validation (400/404 problem+json), not Fastify's bare 414
    routerOptions: { maxParamLength: 2048 },
    clientErrorHandler: (err: NodeJS.ErrnoException, socket: import('net').Socket) => answerClientError(err, socket, baseHeaders.all),
    // a malformed or over-long URL never reaches routing (nor the onSend hook): the one error
    // envelope all the same, with its request id
    frameworkErrors: (error: Error, request: FastifyRequest, reply: FastifyReply) =>
      sendRendered(reply.headers(baseHeaders.all).header('X-Request-Id', String(request.id)), renderError(error, originForm(request.url), String(request.id))),
    logger: false,
    // X-Request-Id: the caller's when well-formed, else a new UUID; copied onto the raw
    // request so the pino request logger and error logs carry the same id.
    genReqId: (raw: import('http').IncomingMessage) => {
      const given = raw.headers['x-request-id'];
      const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
      raw.headers['x-request-id'] = id;
      return id;
    },
  });
  const app = await closeRedisIfBootFails(() => NestFactory.create<NestFastifyApplication>(ApiModule, adapter, { bufferLogs: true, abortOnError: false, bodyParser: false }));
  // an Expect other than 100-continue: Node's bare 417 otherwise
  app.getHttpServer().on('checkExpectation', (req: import('http').IncomingMessage, res: import('http').ServerResponse) => answerUnmetExpectation(req, res, baseHeaders.all));
  app.getHttpServer().on('connect', (req: import('http').IncomingMessage, socket: import('stream').Duplex) => answerConnect(req, socket, baseHeaders.all));
  closeConnectionsOnShutdown(app);
  if (opts.logger !== false) app.useLogger(app.get(Logger));
  else app.useLogger(false);
  await configureApp(app, config);
  return app;
}

async function configureApp(app: NestFastifyApplication, config: AppConfig): Promise<void> {
  const fastify = app.getHttpAdapter().getInstance() as unknown as FastifyInstance;
  setCursorKey(app.get(EnvelopeCipher).deriveKeys('cursor'));
  installBodyParsers(fastify, config.BODY_LIMIT_BYTES);

  await app.register(fastifyCookie as never);
  const apiCors = {
    origin: config.corsOrigins.length ? config.corsOrigins : false,
    credentials: true,
    // every method the API answers (the plugin's default is GET, HEAD, POST only: a dashboard on an
    // allowed origin could not PATCH its settings or DELETE an API key); requested headers are
    // reflected (Content-Type, X-CSRF-Token, X-API-Key, Authorization, ...)
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    maxAge: 600,
    exposedHeaders: ['X-Request-Id', 'Retry-After', 'X-Service-Docs', 'WWW-Authenticate'],
  };
  // an OPTIONS that is no CORS preflight (no Origin or no Access-Control-Request-Method) is answered
  // as any request no route takes (405 with Allow, or 404, in the error envelope), before the CORS
  // plugin (registered next) would answer it with a 400 text/plain or, for the public documents, a 204
  fastify.addHook('onRequest', (req, reply, done) => {
    if (req.method === 'OPTIONS' && !(req.headers.origin && req.headers['access-control-request-method'])) {
      reply.callNotFound();
      return;
    }
    done();
  });
  // a route declared inside a plugin (the CORS plugin's OPTIONS *) keeps the error handler there is
  // when the plugin loads: Fastify's own, as Nest installs its handler later (app.init), so a
  // preflight the checks above refused (a %00 in its query) was answered outside the envelope.
  // Routes are given a handler that defers, when an error comes, to the one then installed
  fastify.addHook('onRoute', (route) => {
    route.errorHandler ??= function deferToInstalled(this: FastifyInstance, error, request, reply) {
      return fastify.errorHandler.call(this, error, request, reply);
    };
  });
  await app.register(fastifyCors as never, apiCors as never);
  // the JWKS and the discovery documents are public (PUBLIC_CORS on their routes, and here their preflights)
  installPublicPreflight(fastify);

  fastify.addHook('onSend', (req, reply, payload, done) => {
    reply.headers(answeredHeaders().security);
    reply.header('X-Request-Id', req.id);
    // answers carry tokens, secrets and personal data: never stored by a cache (RFC 6749 section
    // 5.1 for token responses) unless a route says otherwise (JWKS, discovery)
    if (!reply.hasHeader('cache-control')) reply.header('Cache-Control', 'no-store');
    done(null, payload);
  });
  if (config.METRICS_ENABLED) installMetrics(fastify);
  // the request line's tenant and route template (logger.ts requestLineProps)
  if (requestLogsEnabled(config)) linkRequestForLogs(fastify);

  // errors raised by Fastify itself (body parsing, size) and unknown routes reach the global
  // ProblemFilter through Nest's own Fastify error and not-found handlers: one envelope.

  app.useGlobalPipes(createValidationPipe());
  app.enableShutdownHooks(['SIGTERM', 'SIGINT']);

  const doc = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('authp: authentication platform API')
      .setDescription(
        'Multi-tenant authentication with guest sessions and RFC 8693 token exchange for AI agents. ' +
          'Errors are RFC 9457 problem+json (`code` is stable); /oauth/* errors use RFC 6749 section 5.2. ' +
          'Rate limits answer 429 with Retry-After and X-Service-Docs.\n\n' +
          // Swagger UI gives headings no id: the anchor of every 429's X-Service-Docs (RATE_LIMIT_DOCS_URL)
          '<a id="rate-limits"></a>\n\n## Rate limits\n\n' +
          '| Limit | Default | Code |\n|---|---|---|\n' +
          `| POST /v1/auth/register per client address | ${config.RATE_LIMIT_REGISTER_PER_MIN}/min | rate_limit/exceeded |\n` +
          `| POST /v1/auth/anonymous per client address | ${config.RATE_LIMIT_ANONYMOUS_PER_IP_PER_MIN}/min | anonymous/rate_limited |\n` +
          `| POST /v1/auth/anonymous per API key (counts only requests the per-address limit let through, with a valid body) | ${config.RATE_LIMIT_ANONYMOUS_PER_KEY_PER_HOUR}/hour | anonymous/rate_limited |\n` +
          `| POST /v1/onboarding/signup per client address | ${config.RATE_LIMIT_SIGNUP_PER_MIN}/min | rate_limit/exceeded |\n` +
          `| POST /v1/auth/dashboard/invites/accept per client address (4 x RATE_LIMIT_SIGNUP_PER_MIN) | ${config.RATE_LIMIT_SIGNUP_PER_MIN * 4}/min | rate_limit/exceeded |\n` +
          `| POST /v1/auth/refresh per client address | ${config.RATE_LIMIT_REFRESH_PER_IP_PER_MIN}/min | rate_limit/exceeded |\n` +
          `| password sign-ins, successful ones included: POST /v1/auth/login / POST /v1/auth/dashboard/login, each per client address | ${config.RATE_LIMIT_LOGIN_PER_IP_PER_MIN}/min each | rate_limit/exceeded |\n` +
          `| passwords proven outside sign-in (POST /v1/auth/password/change, /v1/auth/step-up/password, /v1/auth/mfa/disable, /v1/auth/mfa/recovery-codes, /v1/auth/dashboard/reauth), together per client address | ${config.RATE_LIMIT_LOGIN_PER_IP_PER_MIN}/min | rate_limit/exceeded |\n` +
          `| notices of a change mailed to an account's address (password changed, second factor changed), per template and address; beyond, the change is made and the notice left out | ${config.RATE_LIMIT_EMAIL_PER_ADDRESS} per ${config.RATE_LIMIT_EMAIL_WINDOW_SECONDS} s | none (no error) |\n` +
          `| failed sign-ins per (account, address) / account / address | ${config.LOGIN_FAILURES_PER_ACCOUNT_IP} / ${config.LOGIN_FAILURES_PER_ACCOUNT} / ${config.LOGIN_FAILURES_PER_IP} per ${config.LOGIN_FAILURE_WINDOW_SECONDS} s | auth/login_throttled |\n` +
          `| dashboard writes / reads per session | ${config.RATE_LIMIT_AUTH_WRITE_MAX} / ${config.RATE_LIMIT_AUTH_READ_MAX} per min | rate_limit/exceeded |\n` +
          `| dashboard invitation mails per invited address (all tenants) / invitations per tenant | ${config.RATE_LIMIT_INVITES_PER_ADDRESS_PER_HOUR}/hour / ${config.RATE_LIMIT_INVITES_PER_TENANT_PER_DAY}/day | rate_limit/exceeded |\n` +
          `| mails per address and flow (forgot, resend, magic link, email code, step-up) / mail requests per client address | ${config.RATE_LIMIT_EMAIL_PER_ADDRESS} / ${config.RATE_LIMIT_EMAIL_PER_IP} per ${config.RATE_LIMIT_EMAIL_WINDOW_SECONDS} s | rate_limit/exceeded |\n` +
          `| token and code checks (verify-email, reset, magic link and code verification, step-up) per client address | ${config.RATE_LIMIT_CODE_VERIFY_PER_IP_PER_MIN}/min | rate_limit/exceeded |\n` +
          `| POST /v1/auth/mfa/verify per client address | ${config.RATE_LIMIT_MFA_VERIFY_PER_IP_PER_MIN}/min | rate_limit/exceeded |\n` +
          `| wrong email codes (sign-in, step-up) per email address (step-up: per user), all codes and client addresses (one that signed in to the account with a code before excepted) | ${config.EMAIL_CODE_FAILURES_PER_ADDRESS} per ${config.EMAIL_CODE_FAILURE_WINDOW_SECONDS} s | auth/login_throttled |\n` +
          `| wrong second-factor codes per account (addresses that passed MFA before excepted) | ${config.MFA_FAILURES_PER_ACCOUNT} per ${config.LOGIN_FAILURE_WINDOW_SECONDS} s | auth/login_throttled |\n` +
          '| POST /oauth/token per agent client / per subject token jti | 60 (override up to 600) / 10 per min | slow_down (RFC 6749 envelope) |\n' +
          '| POST /oauth/token token exchange per client that is not an agent (always refused: unauthorized_client) | 60 per min | slow_down (RFC 6749 envelope) |\n' +
          '| POST /oauth/token: unexpired tokens an agent holds at once (all users) | agent_settings.max_concurrent_tokens, unset = none; Retry-After until the oldest expires | slow_down (RFC 6749 envelope) |\n' +
          '| bearer calls with an agent\'s tokens (all its tokens and users) | agent_settings.rate_limits.api_calls_per_min per min, unset = none, at most 600 | rate_limit/exceeded |\n',
      )
      .setVersion('1.0.0')
      .addBearerAuth()
      .addApiKey({ type: 'apiKey', in: 'header', name: 'X-API-Key' }, 'api_key')
      .addCookieAuth(DASHBOARD_COOKIE, { type: 'apiKey', in: 'cookie', name: DASHBOARD_COOKIE, description: 'dashboard session; state-changing calls also need X-CSRF-Token' }, DASHBOARD_COOKIE)
      .addBasicAuth({ type: 'http', scheme: 'basic', description: 'OAuth client credentials (RFC 6749 section 2.3.1: form-encoded, then base64); client_id and client_secret in the form body work too, not both' }, OAUTH_CLIENT_BASIC)
      .build(),
  );
  closeRequestSchemas(doc);
  declareBodyRefusals(doc);
  declareLongPathRefusals(doc);
  csrfOnWrites(doc);
  SwaggerModule.setup('docs', app, doc, { jsonDocumentUrl: 'openapi.json' });
}

/**
 * helmet's security headers, computed once: they do not depend on the request, and running the
 * helmet middleware chain on every request cost about 3% of a fast route's CPU.
 */
function helmetHeaders(options: HelmetOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  const res = {
    setHeader: (k: string, v: unknown) => void (headers[k] = String(v)),
    removeHeader: (k: string) => void delete headers[k],
    getHeader: (k: string) => headers[k],
  };
  helmet(options)({} as never, res as never, () => undefined);
  return headers;
}
