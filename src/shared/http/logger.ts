import { DynamicModule, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Options as PinoHttpOptions } from 'pino-http';
import type { AppConfig } from '../../config/config';
import { getConfig } from '../../config/config.module';

/** Paths pino removes from every log line: credentials, tokens, secrets, dates of birth. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["x-csrf-token"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.current_password',
  '*.new_password',
  '*.token',
  '*.access_token',
  '*.refresh_token',
  '*.subject_token',
  '*.secret',
  '*.client_secret',
  '*.key',
  '*.date_of_birth',
  '*.invite_token',
  '*.csrf_token',
];

/** Probes and scrapes, every few seconds: no request line (their failures still log their errors). */
const UNLOGGED_PATHS = new Set(['/health', '/ready', '/metrics']);

/**
 * The path of a request as the client sent it. Inside Nest's middleware (run by @fastify/middie)
 * `req.url` is relative to the middleware's mount point, `/` for every request under `*`; the
 * full URL is in `originalUrl`.
 */
function requestPath(req: { url?: string; originalUrl?: string }): string {
  return (req.originalUrl ?? req.url ?? '').split('?', 1)[0];
}

/**
 * Where the log lines go: stdout, unless a stream is set here before the API module is loaded
 * (`loggerModule()` runs when it is imported). Tests set it to read the lines they assert on.
 */
export const logDestination: { stream?: DestinationStream } = {};

/**
 * Request lines are info-level. Above info nothing per request would be written, so the
 * per-request logger (a child logger and an async context per request, about a tenth of the
 * CPU of a fast route) is not installed; errors are still logged with their request id.
 */
export function requestLogsEnabled(config: Pick<AppConfig, 'LOG_LEVEL'>): boolean {
  return ['trace', 'debug', 'info'].includes(config.LOG_LEVEL);
}

/** The Fastify request of a raw Node request (linkRequestForLogs), for the request line's late fields. */
const FASTIFY_REQUEST = Symbol('authp.fastifyRequest');
type LinkedRaw = { [FASTIFY_REQUEST]?: FastifyRequest };

/**
 * The request logger (pino-http, run as Nest middleware) sees only Node's raw request; what the
 * request line adds at its end (requestLineProps: the tenant a guard resolved, the route
 * template) lives on Fastify's. One property per request links the two.
 */
export function linkRequestForLogs(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (req, _reply, done) => {
    (req.raw as LinkedRaw)[FASTIFY_REQUEST] = req;
    done();
  });
}

/**
 * pino-http's customProps, called when the request starts and again when its line is written:
 * - at the start, `service`, on every line the request's logger writes;
 * - on the request line (its answer's headers sent), what is known only by then: `tenant_id`,
 *   the tenant the route's guard resolved (from the API key or the bearer token, or the
 *   dashboard's `{slug}`; never the key or the token themselves), so "tenant X sees 401s since
 *   10:02" can be read from the logs though the API key is redacted and end-user paths name no
 *   tenant; and `route`, the route template (`/v1/tenants/:slug/webhooks/:id`), as the metrics'
 *   `route` label, to group by. Either is left out when there is none (no guard passed, no route).
 */
export function requestLineProps(req: object, res: { headersSent: boolean }): Record<string, string> {
  if (!res.headersSent) return { service: 'authp' };
  const r = (req as LinkedRaw)[FASTIFY_REQUEST];
  if (!r) return {};
  const auth = r.auth;
  const tenant = auth?.apiKey?.tenantId ?? auth?.user?.tenantId ?? auth?.dashboard?.tenant?.id;
  const route = r.routeOptions?.url;
  const props: Record<string, string> = {};
  if (tenant) props.tenant_id = tenant;
  if (route) props.route = route;
  return props;
}

/** JSON logs via pino, one line per request, with the request id. */
export function loggerModule(): DynamicModule {
  const config = getConfig();
  const requestLogs = requestLogsEnabled(config);
  const pinoHttp: PinoHttpOptions = {
    level: config.LOG_LEVEL,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    genReqId: (req) => String(req.headers['x-request-id'] ?? ''),
    customProps: requestLineProps,
    serializers: {
      req: (req: { id: string; method: string; url: string }) => ({ id: req.id, method: req.method, url: req.url?.split('?')[0] }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
    },
    autoLogging: { ignore: (req) => UNLOGGED_PATHS.has(requestPath(req)) },
  };
  const module = LoggerModule.forRoot({ pinoHttp: logDestination.stream ? [pinoHttp, logDestination.stream] : pinoHttp });
  // the same providers (Logger, PinoLogger) without LoggerModule's middleware: with no Nest
  // middleware at all, @fastify/middie skips its per-request work (it copies ip, ips, hostname,
  // protocol and query onto the raw request and normalizes the path for every request otherwise)
  return requestLogs ? module : { ...module, module: LoggerProvidersModule, global: true };
}

/** nestjs-pino's logger providers, without the per-request logging middleware. */
@Module({})
class LoggerProvidersModule {}
