import cluster from 'node:cluster';
import { METHODS } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { AggregatorRegistry, Counter, Histogram, collectDefaultMetrics } from 'prom-client';
import { metricsRegistry, outcomeCounter } from './metrics-registry';

export { metricsRegistry };

let started = false;

/**
 * Starts what the API's /metrics reports beyond its counters, once per process, at the API's
 * bootstrap (installMetrics), never on import: the process's default collectors (CPU, memory,
 * event loop lag, GC) on metricsRegistry and, in an API process of API_WORKERS>1, prom-client's
 * answer to the primary's requests for that registry. The worker, which imports the batchers
 * (and so metricsRegistry), starts none of this.
 */
export function startApiMetrics(): void {
  if (started) return;
  started = true;
  collectDefaultMetrics({ register: metricsRegistry });
  if (cluster.isWorker) {
    AggregatorRegistry.setRegistries([metricsRegistry]);
    new AggregatorRegistry(); // installs that listener (once per process)
  }
}

export const CLUSTER_METRICS_REQUEST = 'authp:cluster-metrics-request';
export const CLUSTER_METRICS_REPLY = 'authp:cluster-metrics-reply';
interface MetricsRequest { type: typeof CLUSTER_METRICS_REQUEST; id: number }
interface MetricsReply { type: typeof CLUSTER_METRICS_REPLY; id: number; text?: string; error?: string }

/**
 * The primary of API_WORKERS>1 (it serves no HTTP): answers an API process's request for the
 * metrics of every API process, summed by prom-client's AggregatorRegistry (which asks each
 * process over cluster IPC). Counters then never go down between scrapes, whichever process a
 * scrape reaches. `aggregate` is injectable for tests.
 */
export function serveClusterMetrics(
  primary: { on(event: 'message', l: (worker: { send(msg: unknown): unknown }, msg: unknown) => void): unknown },
  aggregate: () => Promise<string> = (() => {
    const agg = new AggregatorRegistry();
    return () => agg.clusterMetrics();
  })(),
): void {
  primary.on('message', (worker, msg) => {
    const m = msg as Partial<MetricsRequest> | null;
    if (!m || m.type !== CLUSTER_METRICS_REQUEST || typeof m.id !== 'number') return;
    const id = m.id;
    aggregate().then(
      (text) => worker.send({ type: CLUSTER_METRICS_REPLY, id, text } satisfies MetricsReply),
      (err: Error) => worker.send({ type: CLUSTER_METRICS_REPLY, id, error: err.message } satisfies MetricsReply),
    );
  });
}

/**
 * In an API process of API_WORKERS>1: asks the primary for the cluster's metrics and waits for its
 * reply (at most `timeoutMs`; prom-client's own limit per request is 5 s). Injectable for tests.
 */
export function clusterMetricsRequester(
  proc: { send(msg: unknown): unknown; on(event: 'message', l: (msg: unknown) => void): unknown },
  timeoutMs = 6_000,
): () => Promise<string> {
  let next = 0;
  const pending = new Map<number, { resolve: (t: string) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  proc.on('message', (msg) => {
    const m = msg as Partial<MetricsReply> | null;
    if (!m || m.type !== CLUSTER_METRICS_REPLY || typeof m.id !== 'number') return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    clearTimeout(p.timer);
    if (typeof m.text === 'string') p.resolve(m.text);
    else p.reject(new Error(`cluster metrics: ${m.error ?? 'no answer'}`));
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`cluster metrics: the primary did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      pending.set(id, { resolve, reject, timer });
      proc.send({ type: CLUSTER_METRICS_REQUEST, id } satisfies MetricsRequest);
    });
}

let fromPrimary: (() => Promise<string>) | undefined;

/** What GET /metrics answers: this process's metrics, or with API_WORKERS>1 those of every API process summed. */
export function metricsText(): Promise<string> {
  if (cluster.isWorker && process.send) {
    fromPrimary ??= clusterMetricsRequester(process as unknown as Parameters<typeof clusterMetricsRequester>[0]);
    return fromPrimary();
  }
  return metricsRegistry.metrics();
}

const requests = new Counter({
  name: 'http_requests_total',
  help: 'HTTP requests by method, route and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [metricsRegistry],
});
const latency = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request latency by method and route',
  labelNames: ['method', 'route'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [metricsRegistry],
});

/** http_requests_total's `route` of a request answered before Fastify routed it (countUnparsed). */
export const UNPARSED_ROUTE = 'unparsed';

/** Node's own method names (a bounded set): any other token of a request line counts as `unknown`. */
const KNOWN_METHODS = new Set(METHODS);

/**
 * Counts, in http_requests_total, a request answered before Fastify saw it (app.factory.ts:
 * answerClientError, answerConnect, answerOutsideFastify: 400, 408, 431, 417, CONNECT's 405):
 * route `unparsed`, so a slow-loris run (408), header overflows (431) or parser probes (400) show
 * on /metrics though neither the onResponse hook nor the request log ever sees them. `method`
 * comes from a request line the parser may have refused: outside Node's method names it is
 * `unknown`, so the label stays bounded. No latency is observed (no request was handled).
 */
export function countUnparsed(method: string | undefined, status: number): void {
  requests.inc({ method: method && KNOWN_METHODS.has(method) ? method : 'unknown', route: UNPARSED_ROUTE, status: String(status) });
}

/*
 * Business counters (docs/scaling.md "Metrics"): what the request counts cannot tell apart (a 401
 * is a wrong password or a dead link; a 429 any of a dozen limits). Labels are small fixed sets
 * named in code, never a tenant, user, address or free text. Each count is one increment in this
 * process's registry (summed across API processes at a scrape): no await, no Redis, on hot paths.
 */

/** How an end user (or a dashboard member: `dashboard`) signed in; `mfa`: the second step (POST /v1/auth/mfa/verify). */
export type SignInMethod = 'password' | 'magic_link' | 'email_otp' | 'mfa' | 'dashboard';
export type SignInOutcome = 'success' | 'failure' | 'throttled' | 'mfa_required';
const SIGN_IN_METHODS: readonly SignInMethod[] = ['password', 'magic_link', 'email_otp', 'mfa', 'dashboard'];
const SIGN_IN_OUTCOMES: readonly SignInOutcome[] = ['success', 'failure', 'throttled', 'mfa_required'];

const signIns = new Counter({
  name: 'authp_sign_ins_total',
  help: 'Sign-ins by method and outcome (success; mfa_required: first factor right, second asked; failure: refused, wrong or dead credential; throttled: 429 of a failed-sign-in or rate limit)',
  labelNames: ['method', 'outcome'] as const,
  registers: [metricsRegistry],
});
// every series from the start at 0: an alert on rate(...{outcome="failure"}) works from the first failure
for (const method of SIGN_IN_METHODS) for (const outcome of SIGN_IN_OUTCOMES) signIns.labels(method, outcome).inc(0);

/** One sign-in attempt's outcome (see SignInMethod, SignInOutcome). */
export function countSignIn(method: SignInMethod, outcome: SignInOutcome): void {
  signIns.inc({ method, outcome });
}

/**
 * A sign-in that threw: 429 counts as `throttled`, any other client error (4xx: a wrong password
 * or code, a dead link or challenge) as `failure`. A server error (5xx, PostgreSQL or Redis away)
 * is no verdict on the credential and is not counted here (http_requests_total has it).
 */
export function countSignInError(method: SignInMethod, err: unknown): void {
  const status = (err as { status?: unknown } | null)?.status;
  if (typeof status !== 'number' || status >= 500) return;
  countSignIn(method, status === 429 ? 'throttled' : 'failure');
}

/**
 * Runs a sign-in and counts its outcome: a challenge for a second factor (`mfa_required: true`)
 * as mfa_required, any other answer as success, an error as countSignInError does.
 */
export async function countedSignIn<T extends object>(method: SignInMethod, signIn: Promise<T>): Promise<T> {
  try {
    const result = await signIn;
    countSignIn(method, (result as { mfa_required?: unknown }).mfa_required === true ? 'mfa_required' : 'success');
    return result;
  } catch (e) {
    countSignInError(method, e);
    throw e;
  }
}

const rateLimited = new Counter({
  name: 'authp_rate_limited_total',
  help: "Requests refused 429 by a rate limit or throttle, by limiter (a route rule's bucket, failed_sign_in:<kind>, mail-ip, mail-address)",
  labelNames: ['limiter'] as const,
  registers: [metricsRegistry],
});

/** A 429 decided by `limiter`: a fixed name in code (a @RateLimit bucket, `failed_sign_in:user`, ...), never a key or subject. */
export function countRateLimited(limiter: string): void {
  rateLimited.inc({ limiter });
}

/** Spec 6's token-exchange outcomes (the oauth.token_exchange.* event of a refusal), and the refusals that have no event. */
export type TokenExchangeOutcome =
  | 'issued'
  | 'subject_invalid'
  | 'scope_denied'
  | 'rate_limited'
  | 'client_unauthorized'
  | 'client_invalid'
  | 'invalid_request'
  | 'unavailable'
  | 'error';
const TOKEN_EXCHANGE_OUTCOMES: readonly TokenExchangeOutcome[] = ['issued', 'subject_invalid', 'scope_denied', 'rate_limited', 'client_unauthorized', 'client_invalid', 'invalid_request', 'unavailable', 'error'];

/** One token exchange's outcome. */
export const countTokenExchange = outcomeCounter(
  'authp_token_exchange_total',
  'POST /oauth/token token exchanges by outcome (issued, or the refusal: subject_invalid, scope_denied, rate_limited, client_unauthorized, client_invalid, invalid_request, unavailable, error)',
  TOKEN_EXCHANGE_OUTCOMES,
  metricsRegistry,
);

const refreshReuse = new Counter({
  name: 'authp_refresh_reuse_total',
  help: 'Sessions ended because a rotated refresh token was presented again (RFC 9700 reuse detection)',
  registers: [metricsRegistry],
});

/** A refresh token's reuse ended its session. */
export function countRefreshReuse(): void {
  refreshReuse.inc();
}

/**
 * The API's metrics (METRICS_ENABLED): starts the process collectors (startApiMetrics), then counts
 * every request and observes its latency, labelled by route pattern (not raw URL). The labelled
 * children are kept per (method, route, status), a bounded set, so a request does not hash its
 * label object twice (prom-client's `labels()` children are meant to be reused).
 */
export function installMetrics(fastify: FastifyInstance): void {
  startApiMetrics();
  const children = new Map<string, { count: { inc: () => void }; latency: { observe: (v: number) => void } }>();
  fastify.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions?.url ?? 'unmatched';
    const status = String(reply.statusCode);
    const key = `${req.method} ${status} ${route}`;
    let child = children.get(key);
    if (!child) {
      child = { count: requests.labels(req.method, route, status), latency: latency.labels(req.method, route) };
      children.set(key, child);
    }
    child.count.inc();
    child.latency.observe(reply.elapsedTime / 1000);
    done();
  });
}
