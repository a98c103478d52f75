/* eslint-disable */
// `npm run bench`: autocannon against the built API (API_WORKERS processes: 2 unless BENCH_API_WORKERS says otherwise) on real
// PostgreSQL and Redis. Limits stay on: load is spread over many client addresses
// (X-Forwarded-For, TRUST_PROXY=loopback) and API keys. Results are appended to bench/RESULTS.md.
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execSync } = require('child_process');
const autocannon = require('autocannon');
const { openLoop } = require('./open-loop');

const BASE = process.env.BENCH_URL || 'http://127.0.0.1:3101';
const DURATION = Number(process.env.BENCH_DURATION || 15);
const ip = () => `10.${crypto.randomInt(256)}.${crypto.randomInt(256)}.${1 + crypto.randomInt(254)}`;
const PASSWORD = 'correct horse battery staple';

async function http(method, url, { body, headers = {} } = {}) {
  const res = await fetch(BASE + url, {
    method,
    headers: { ...(body ? { 'content-type': 'application/json' } : {}), 'x-forwarded-for': ip(), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = text; }
  if (res.status >= 300) throw new Error(`${method} ${url} -> ${res.status} ${text}`);
  return { json, headers: res.headers };
}

async function pool(n, concurrency, fn) {
  const out = new Array(n);
  let i = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => { while (i < n) { const k = i++; out[k] = await fn(k); } }));
  return out;
}

async function setup() {
  const tenants = [];
  for (let i = 0; i < 10; i++) {
    const s = await http('POST', '/v1/onboarding/signup', { body: { email: `bench-${Date.now()}-${i}@example.com`, password: PASSWORD, tenant_name: `Bench ${i} ${crypto.randomBytes(3).toString('hex')}`, consent_terms: true, consent_privacy: true } });
    const cookie = s.headers.get('set-cookie').split(';')[0];
    const h = { cookie, 'x-csrf-token': s.json.csrf_token };
    await http('PATCH', `/v1/auth/dashboard/tenants/${s.json.tenant.slug}/settings/anonymous`, { body: { anonymous_signins_enabled: true }, headers: { ...h, 'x-service-confirm': 'privileged-default-role' } });
    const keys = [];
    for (let k = 0; k < 16; k++) keys.push((await http('POST', `/v1/auth/dashboard/tenants/${s.json.tenant.slug}/api-keys`, { body: { name: `bench-${k}` }, headers: h })).json.key);
    tenants.push({ slug: s.json.tenant.slug, keys, headers: h });
  }
  // the operator raises the tier so the monthly allowance does not end the guest run
  for (const t of tenants) execSync(`node dist/cli tenants:set-tier ${t.slug} enterprise`, { stdio: 'ignore' });
  const key = tenants[0].keys[0];
  // agents (Pro tier or higher): 12 per tenant, each allowed the 600/min ceiling for token exchange
  const agents = [];
  for (const t of tenants) {
    for (let a = 0; a < 12; a++) {
      const r = await http('POST', `/v1/auth/dashboard/tenants/${t.slug}/agents`, { body: { name: `agent-${a}`, scopes: ['openid', 'profile'], grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'], agent_token_max_ttl_sec: 900, agent_settings: { rate_limits: { token_exchange_per_min: 600 } } }, headers: t.headers });
      agents.push({ id: r.json.id, secret: r.json.client_secret, key: t.keys[0], tenant: t.slug });
    }
  }
  const users = await pool(300, 16, async (i) => {
    const email = `u${i}-${crypto.randomBytes(4).toString('hex')}@example.com`;
    const r = await http('POST', '/v1/auth/register', { body: { email, password: PASSWORD, consent: true }, headers: { 'x-api-key': key } });
    return { email, access: r.json.access_token, refresh: r.json.refresh_token };
  });
  // subject tokens for the exchange: per-user access tokens of each agent's tenant (10 exchanges/min
  // per jti). BENCH_SUBJECT_USERS (80) users per tenant x 10 tokens each x 10 tenants = 8,000 tokens,
  // 80,000 exchanges a minute: room for a maximum-throughput run and a fixed-rate run in one minute
  const subjects = [];
  for (const t of tenants) {
    const u = await pool(Number(process.env.BENCH_SUBJECT_USERS || 80), 10, async (i) => {
      const email = `s${i}-${crypto.randomBytes(4).toString('hex')}@example.com`;
      return (await http('POST', '/v1/auth/register', { body: { email, password: PASSWORD, consent: true }, headers: { 'x-api-key': t.keys[0] } })).json;
    });
    // more distinct jtis from refreshes of the same sessions
    for (const first of u) {
      let rt = first.refresh_token;
      subjects.push({ tenant: t.slug, token: first.access_token });
      for (let k = 0; k < 9; k++) {
        const r = (await http('POST', '/v1/auth/refresh', { body: { refresh_token: rt }, headers: { 'x-api-key': t.keys[0] } })).json;
        rt = r.refresh_token;
        subjects.push({ tenant: t.slug, token: r.access_token });
      }
    }
  }
  // MFA users: password then TOTP. Codes are single use, so each user signs in at most once per
  // 30 s step: 800 users last the 8 s run at up to 100 sign-ins/s (a repeat would be refused, rightly)
  const { authenticator } = require('otplib');
  const mfaUsers = await pool(Number(process.env.BENCH_MFA_USERS || 800), 8, async (i) => {
    const email = `m${i}-${crypto.randomBytes(4).toString('hex')}@example.com`;
    const r = (await http('POST', '/v1/auth/register', { body: { email, password: PASSWORD, consent: true }, headers: { 'x-api-key': key } })).json;
    const setup = (await http('POST', '/v1/auth/mfa/totp/setup', { headers: { authorization: `Bearer ${r.access_token}` } })).json;
    await http('POST', '/v1/auth/mfa/totp/verify-setup', { body: { code: authenticator.generate(setup.secret) }, headers: { authorization: `Bearer ${r.access_token}` } });
    return { email, secret: setup.secret };
  });
  return { tenants, key, users, allKeys: tenants.flatMap((t) => t.keys), agents, subjects, mfaUsers };
}

function summarize(name, r, mode) {
  return {
    name, mode,
    rps: Math.round(r.requests.average),
    p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99,
    total: r.requests.total, non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts, stall: r.stall, cpu: r.cpu,
  };
}

/**
 * Before each measured run, as pgbench vacuums before its own: VACUUM ANALYZE (the planner has
 * statistics for the rows the set-up and the previous runs wrote, and no dead rows are left from
 * them; autovacuum would do this in production, and it may be off on a benchmark host, as on this
 * one) and CHECKPOINT (the timed checkpoint, and the full-page WAL images after it, do not fall in
 * some runs and not in others: every run starts just after one).
 */
function settleDatabase() {
  execSync(`psql "${process.env.DATABASE_URL}" -qc 'VACUUM ANALYZE' -c 'CHECKPOINT'`, { stdio: 'ignore' });
}

/**
 * BENCH_CPU_PROFILE=<dir>: the API processes (bench.sh sets CPU_PROFILE_DIR for them) profile each
 * measured run, from SIGUSR2 before it to SIGUSR2 after it (src/shared/http/cpu-profile.ts).
 */
function toggleApiProfiles(label) {
  const apiPid = process.env.BENCH_API_PID;
  if (!process.env.BENCH_CPU_PROFILE || !apiPid) return;
  let pids = fs.readFileSync(`/proc/${apiPid}/task/${apiPid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  if (!pids.length) pids = [apiPid];
  for (const pid of pids) process.kill(Number(pid), 'SIGUSR2');
  if (label) console.log(`cpu profile: ${label}`);
}

async function run(opts) {
  settleDatabase();
  toggleApiProfiles();
  const before = cpuSnapshot();
  const gen0 = process.cpuUsage();
  // fixed offered rate: open loop (bench/open-loop.js says why not autocannon's overallRate);
  // the two-step MFA sign-in keeps autocannon
  const r = opts.overallRate && opts.requests.length === 1
    ? await runOpenLoop(opts)
    : await new Promise((resolve, reject) => autocannon({ url: BASE, duration: DURATION, ...opts }, (err, res) => (err ? reject(err) : resolve(res))));
  const after = cpuSnapshot();
  const gen = process.cpuUsage(gen0);
  toggleApiProfiles(`${opts.requests.map((q) => `${q.method} ${q.path}`).join(' + ')}${opts.overallRate ? ` at ${opts.overallRate}/s` : ' at max'}`);
  const sent = r.sentAll ?? r.requests.sent ?? r.requests.total;
  // CPU time per request (microseconds): of the API processes, and of the whole host (API,
  // PostgreSQL, Redis and this generator), and of this generator (autocannon or open loop, in this
  // process) on its own. Steadier than req/s when the host's speed varies.
  if (before && after && sent) {
    const per = (k) => Math.round(((after[k] - before[k]) * 1e6) / TICK / sent);
    r.cpu = { api: per('api'), pg: per('pg'), redis: per('redis'), gen: Math.round((gen.user + gen.system) / sent), host: per('host') };
  }
  return r;
}

const TICK = 100; // USER_HZ: /proc reports CPU time in 1/100 s on Linux
/**
 * utime + stime (ticks) of one process from its /proc stat line; with `reaped`, also cutime +
 * cstime, the time of its children that have ended (PostgreSQL's backends end when the pool
 * closes a connection: their time moves to the postmaster's cutime, it does not vanish).
 */
function procTicks(stat, reaped = false) {
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]) + (reaped ? Number(f[13]) + Number(f[14]) : 0);
}

/**
 * CPU ticks used so far by the API (BENCH_API_PID and its children), by PostgreSQL and Redis
 * (every process of theirs on the host: run the benchmark on a host nothing else uses them on)
 * and by the whole host; null off Linux.
 */
function cpuSnapshot() {
  const apiPid = process.env.BENCH_API_PID;
  try {
    const host = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const hostBusy = host.reduce((a, b) => a + b, 0) - host[3] - (host[4] || 0); // minus idle and iowait
    let api = 0;
    const visit = (pid) => {
      api += procTicks(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
      for (const c of fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) visit(c);
    };
    if (apiPid) visit(apiPid);
    let pg = 0;
    let redis = 0;
    for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      let stat;
      try {
        stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      } catch {
        continue; // ended meanwhile
      }
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (comm === 'postgres') pg += procTicks(stat, true);
      else if (comm === 'redis-server') redis += procTicks(stat);
    }
    return { api, pg, redis, host: hostBusy };
  } catch {
    return null;
  }
}

/** The host-stall canary (bench/canary.js): wake-ups it reported late, as [epoch ms, late ms]. */
const stalls = [];
function startCanary() {
  const { spawn } = require('child_process');
  const file = path.join(__dirname, 'canary.js');
  const child = spawn('nice', ['-n', '-20', process.execPath, file], { stdio: ['ignore', 'pipe', 'ignore'] });
  child.on('error', () => undefined);
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    const lines = buf.split('\n');
    buf = lines.pop();
    for (const l of lines) { const [t, late] = l.split(' ').map(Number); stalls.push([t, late]); }
  });
  return () => child.kill();
}
/** The longest host stall between two instants, and the milliseconds lost to stalls over 10 ms. */
function hostStall(from, to) {
  const inRun = stalls.filter(([t]) => t >= from && t <= to);
  return { max: Math.round(Math.max(0, ...inRun.map(([, l]) => l))), over10: Math.round(inRun.filter(([, l]) => l > 10).reduce((a, [, l]) => a + l, 0)) };
}

async function runOpenLoop(opts) {
  const [spec] = opts.requests;
  // the generator starts each fixed-rate run from a collected heap (bench.sh runs node with
  // --expose-gc): garbage left by the autocannon runs is not collected in the middle of this one
  if (global.gc) global.gc();
  const from = Date.now();
  const r = await openLoop({
    url: BASE, rate: opts.overallRate, duration: opts.duration ?? DURATION, connections: opts.connections,
    request: () => spec.setupRequest({ method: spec.method, path: spec.path, headers: {} }, {}),
    onResponse: spec.onResponse,
  });
  return { requests: { average: r.rps, total: r.total }, latency: { p50: r.p50, p90: r.p90, p99: r.p99 }, non2xx: r.non2xx, errors: r.errors, timeouts: 0, stall: hostStall(from, Date.now()), sentAll: r.sentAll };
}

/** BENCH_SCENARIOS=me,refresh,login,anonymous,exchange,agent-me,mfa runs only those (default: all). */
const ONLY = (process.env.BENCH_SCENARIOS || '').split(',').map((s) => s.trim()).filter(Boolean);
const want = (...names) => !ONLY.length || names.some((n) => ONLY.includes(n));

async function scenarios(ctx, mode, rates) {
  const out = [];
  const fixed = (rate) => (mode === 'fixed' ? { overallRate: rate } : {});
  if (want('me')) {
    // GET /v1/auth/me
    let n = 0;
    out.push(summarize('GET /v1/auth/me', await run({
      connections: 64, ...fixed(rates.me),
      requests: [{ method: 'GET', path: '/v1/auth/me', setupRequest: (req) => ({ ...req, headers: { ...req.headers, authorization: `Bearer ${ctx.users[n++ % ctx.users.length].access}`, 'x-forwarded-for': ip() } }) }],
    }), mode));
  }
  if (want('refresh')) {
    // POST /v1/auth/refresh: every request presents a live, never-used refresh token (guest sessions
    // made beforehand), so each one is a real rotation, not the reuse-grace path. At maximum
    // throughput the pool holds BENCH_REFRESH_POOL_RATE (default 3,500, above the lean prototype's
    // 3.0k) per second of the run; a faster host that uses it up is flagged below the table
    const poolRate = mode === 'fixed' ? rates.refresh * 1.1 : Number(process.env.BENCH_REFRESH_POOL_RATE || 3500);
    const refreshPool = await pool(Math.ceil(DURATION * poolRate), 32, async (i) =>
      (await http('POST', '/v1/auth/anonymous', { body: {}, headers: { 'x-api-key': ctx.allKeys[i % ctx.allKeys.length] } })).json.refresh_token);
    const keyOf = (i) => ctx.allKeys[i % ctx.allKeys.length];
    let c = 0;
    out.push(summarize('POST /v1/auth/refresh', await run({
      connections: 32, ...fixed(rates.refresh),
      requests: [{
        method: 'POST', path: '/v1/auth/refresh',
        setupRequest: (req) => {
          const i = c++ % refreshPool.length;
          return { ...req, headers: { ...req.headers, 'content-type': 'application/json', 'x-api-key': keyOf(i), 'x-forwarded-for': ip() }, body: JSON.stringify({ refresh_token: refreshPool[i] }) };
        },
      }],
    }), mode));
    if (c > refreshPool.length) out[out.length - 1].warning = `the refresh token pool (${refreshPool.length}) ran out: ${c - refreshPool.length} requests presented a token already rotated in this run, and their refusals are in non-2xx (raise BENCH_REFRESH_POOL_RATE)`;
  }
  if (want('login')) {
    // POST /v1/auth/login (argon2id with the OWASP parameters)
    let l = 0;
    out.push(summarize('POST /v1/auth/login', await run({
      connections: 8, ...fixed(rates.login),
      requests: [{ method: 'POST', path: '/v1/auth/login', setupRequest: (req) => { const u = ctx.users[l++ % ctx.users.length]; return { ...req, headers: { ...req.headers, 'content-type': 'application/json', 'x-api-key': ctx.key, 'x-forwarded-for': ip() }, body: JSON.stringify({ email: u.email, password: PASSWORD }) }; } }],
    }), mode));
  }
  if (want('anonymous')) {
    // POST /v1/auth/anonymous over 80 API keys of 10 tenants
    let a = 0;
    out.push(summarize('POST /v1/auth/anonymous', await run({
      connections: 32, ...fixed(rates.anonymous),
      requests: [{ method: 'POST', path: '/v1/auth/anonymous', setupRequest: (req) => ({ ...req, headers: { ...req.headers, 'content-type': 'application/json', 'x-api-key': ctx.allKeys[a++ % ctx.allKeys.length], 'x-forwarded-for': ip() }, body: '{}' }) }],
    }), mode));
  }
  if (want('exchange', 'agent-me')) {
    // POST /oauth/token (token exchange): agents and subject tokens of the same tenant, HTTP Basic
    const byTenant = new Map();
    for (const sub of ctx.subjects) { if (!byTenant.has(sub.tenant)) byTenant.set(sub.tenant, []); byTenant.get(sub.tenant).push(sub.token); }
    let x = 0;
    let limited = 0;
    const subjectTurn = new Map();
    const agentTokens = [];
    const exchangeRun = summarize('POST /oauth/token (token exchange)', await run({
      connections: 32, ...fixed(rates.exchange),
      requests: [{
        method: 'POST', path: '/oauth/token',
        setupRequest: (req) => {
          const i = x++;
          const agent = ctx.agents[i % ctx.agents.length];
          const subs = byTenant.get(agent.tenant);
          // each subject token in turn (10 exchanges per minute per jti), each agent in turn (600/min)
          const k = (subjectTurn.get(agent.tenant) ?? 0) + 1;
          subjectTurn.set(agent.tenant, k);
          const subject = subs[k % subs.length];
          const basic = Buffer.from(`${encodeURIComponent(agent.id)}:${encodeURIComponent(agent.secret)}`).toString('base64');
          const body = new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: subject, subject_token_type: 'urn:ietf:params:oauth:token-type:access_token', scope: 'openid profile' }).toString();
          return { ...req, headers: { ...req.headers, 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}`, 'x-forwarded-for': ip() }, body };
        },
        onResponse: (status, body) => {
          if (status === 429) limited++;
          if (status === 200 && agentTokens.length < 500) agentTokens.push(JSON.parse(body).access_token);
        },
      }],
    }), mode);
    if (limited) exchangeRun.warning = `${limited} exchanges were refused 429 by the per-subject-token (10/min) or per-agent limit: the pool of ${ctx.subjects.length} subject tokens was too small for this host's rate, and those refusals are in non-2xx (raise BENCH_SUBJECT_USERS)`;
    if (want('exchange')) out.push(exchangeRun);
    // bearer calls: an agent token (denylist check) beside a user token on the same route
    if (agentTokens.length && want('agent-me')) {
      let b = 0;
      out.push(summarize('GET /v1/auth/me with an agent token', await run({
        connections: 64, ...fixed(rates.me),
        requests: [{ method: 'GET', path: '/v1/auth/me', setupRequest: (req) => ({ ...req, headers: { ...req.headers, authorization: `Bearer ${agentTokens[b++ % agentTokens.length]}`, 'x-forwarded-for': ip() } }) }],
      }), mode));
    }
  }
  if (want('mfa')) {
    // login with MFA: password, then the TOTP code (two requests per sign-in)
    const { authenticator } = require('otplib');
    let mu = 0;
    const mfaRun = await run({
      connections: 8, duration: Math.min(DURATION, 8), ...fixed(rates.login),
      requests: [
        { method: 'POST', path: '/v1/auth/login', setupRequest: (req, context) => { const u = ctx.mfaUsers[mu++ % ctx.mfaUsers.length]; context.u = u; return { ...req, headers: { ...req.headers, 'content-type': 'application/json', 'x-api-key': ctx.key, 'x-forwarded-for': ip() }, body: JSON.stringify({ email: u.email, password: PASSWORD }) }; }, onResponse: (status, body, context) => { context.ch = status === 200 ? JSON.parse(body).mfa_challenge_token : undefined; } },
        { method: 'POST', path: '/v1/auth/mfa/verify', setupRequest: (req, context) => (context.ch ? { ...req, headers: { ...req.headers, 'content-type': 'application/json', 'x-api-key': ctx.key, 'x-forwarded-for': ip() }, body: JSON.stringify({ mfa_challenge_token: context.ch, code: authenticator.generate(context.u.secret) }) } : null) },
      ],
    });
    const m = summarize('login with MFA (password + TOTP), sign-ins', mfaRun, mode);
    m.rps = Math.round(mfaRun.requests.average / 2);
    out.push(m);
  }
  return out;
}

function rawCosts() {
  const jwt = require('jsonwebtoken');
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const claims = { sub: crypto.randomUUID(), tenant_id: crypto.randomUUID(), scope: 'openid profile email', amr: ['pwd'], aal: 'AAL1', role: 'member', is_anonymous: false, iss: 'http://x', aud: 'http://x', exp: Math.floor(Date.now() / 1000) + 900 };
  let t0 = process.hrtime.bigint(); let i = 0; let tok;
  while (process.hrtime.bigint() - t0 < 2_000_000_000n) { tok = jwt.sign(claims, privateKey, { algorithm: 'RS256', keyid: 'k' }); i++; }
  const sign = Math.round(i / 2);
  t0 = process.hrtime.bigint(); i = 0;
  while (process.hrtime.bigint() - t0 < 2_000_000_000n) { jwt.verify(tok, publicKey, { algorithms: ['RS256'] }); i++; }
  return { sign, verify: Math.round(i / 2) };
}

/** The argon2id parameters the API runs with (its own config loader, same environment). */
function argon2Options() {
  const { loadConfig } = require('../dist/src/config/config');
  const c = loadConfig({ ...process.env });
  return { type: require('argon2').argon2id, memoryCost: c.ARGON2_MEMORY_KIB, timeCost: c.ARGON2_TIME_COST, parallelism: c.ARGON2_PARALLELISM };
}

async function argon2Rate() {
  const argon2 = require('argon2');
  const opts = argon2Options();
  const h = await argon2.hash(PASSWORD, opts);
  const t0 = Date.now(); let n = 0;
  while (Date.now() - t0 < 3000) { await Promise.all(Array.from({ length: os.cpus().length }, () => argon2.verify(h, PASSWORD))); n += os.cpus().length; }
  return Math.round(n / ((Date.now() - t0) / 1000));
}

async function main() {
  argon2Options(); // fail before the long run if the build is missing
  const stopCanary = startCanary();
  const ctx = await setup();
  console.log(`set up: 10 tenants, ${ctx.allKeys.length} API keys, ${ctx.users.length} users, ${ctx.agents.length} agents, ${ctx.subjects.length} subject tokens, ${ctx.mfaUsers.length} MFA users`);
  // BENCH_MODES=fixed (or max) runs only that half
  const modes = (process.env.BENCH_MODES || 'max,fixed').split(',');
  const maxRuns = modes.includes('max') ? await scenarios(ctx, 'max', {}) : [];
  const rates = { me: Number(process.env.BENCH_RATE_ME || 8000), refresh: Number(process.env.BENCH_RATE_REFRESH || 1600), login: Number(process.env.BENCH_RATE_LOGIN || 70), anonymous: Number(process.env.BENCH_RATE_ANONYMOUS || 1800), exchange: Number(process.env.BENCH_RATE_EXCHANGE || 1200) };
  const fixedRuns = modes.includes('fixed') ? await scenarios(ctx, 'fixed', rates) : [];
  stopCanary();
  const raw = rawCosts();
  const argon = await argon2Rate();
  const purge = JSON.parse(execSync('node bench/purge.js', { encoding: 'utf8' }).trim().split('\n').pop());

  const cpu = os.cpus()[0]?.model ?? 'unknown';
  const pg = execSync(`psql "${process.env.BENCH_ADMIN_URL}" -Atc 'show server_version'`, { encoding: 'utf8' }).trim();
  const redis = execSync(`redis-cli -u "${process.env.REDIS_URL || 'redis://127.0.0.1:6379'}" info server | grep redis_version`, { encoding: 'utf8' }).trim();
  const lines = [];
  lines.push(`\n## ${new Date().toISOString()} — ${os.cpus().length} cores (${cpu}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL ${pg}, ${redis}`);
  lines.push(`\nAPI: \`node dist/main\` with API_WORKERS=${process.env.API_WORKERS || 2}, NODE_ENV=development (OWASP argon2id cost, m=${argon2Options().memoryCost} KiB t=${argon2Options().timeCost} p=${argon2Options().parallelism}), LOG_LEVEL=warn; autocannon (max throughput) and an open-loop generator (fixed rate: evenly spaced requests, latency from the scheduled time, recorded once all connections are open and after 1 s at the rate; bench/open-loop.js) in a third process on the same machine, ${DURATION} s per run; host stall: the late wake-ups of an idle process at nice -20 waking every millisecond (bench/canary.js) during the run, which only the machine itself causes; every limit on, load spread over random X-Forwarded-For addresses and ${ctx.allKeys.length} API keys of 10 tenants; each refresh presents a live refresh token never used before (one rotation each); before each run, VACUUM ANALYZE and CHECKPOINT (as pgbench vacuums; this host's PostgreSQL runs with autovacuum off), so every run has fresh planner statistics and starts just after a checkpoint; CPU per request includes the load generator (every request encoded before a fixed-rate run).\n`);
  lines.push('| Scenario | Mode | req/s | p50 ms | p90 ms | p99 ms | requests | non-2xx | errors | host stall ms: longest / lost over 10 ms | CPU µs per request: API / PostgreSQL / Redis / load generator / host |');
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of [...maxRuns, ...fixedRuns]) {
    const rateKey = { 'GET /v1/auth/me': 'me', 'GET /v1/auth/me with an agent token': 'me', 'POST /v1/auth/refresh': 'refresh', 'POST /v1/auth/login': 'login', 'POST /v1/auth/anonymous': 'anonymous', 'POST /oauth/token (token exchange)': 'exchange', 'login with MFA (password + TOTP), sign-ins': 'login' }[r.name];
    const mode = r.mode === 'max' ? 'max throughput' : `fixed ${rates[rateKey]}/s`;
    const stall = r.stall ? `${r.stall.max} / ${r.stall.over10}` : '';
    lines.push(`| ${r.name} | ${mode} | ${r.rps} | ${r.p50} | ${r.p90} | ${r.p99} | ${r.total} | ${r.non2xx} | ${r.errors + r.timeouts} | ${stall} | ${r.cpu ? `${r.cpu.api} / ${r.cpu.pg} / ${r.cpu.redis} / ${r.cpu.gen} / ${r.cpu.host}` : ''} |`);
  }
  for (const r of [...maxRuns, ...fixedRuns]) if (r.warning) lines.push(`\n**Warning**, ${r.name} (${r.mode === 'max' ? 'max throughput' : 'fixed rate'}): ${r.warning}.`);
  lines.push(`\nRaw cost in the same run (one core each): RS256 sign ${raw.sign}/s, RS256 verify ${raw.verify}/s (2048-bit KeyObject); argon2id verify (m=${argon2Options().memoryCost} KiB, t=${argon2Options().timeCost}, p=${argon2Options().parallelism}) ${argon}/s on ${os.cpus().length} cores.`);
  lines.push(`\nGuest purge: ${purge.guests} stale guests across ${purge.tenants} tenants removed in ${purge.runs} runs, ${purge.seconds} s wall time in total (${purge.perRun} s per run on average).`);
  const file = path.join(__dirname, 'RESULTS.md');
  if (!fs.existsSync(file)) fs.writeFileSync(file, '# Benchmark results\n\nAppended by `npm run bench` (bench/run.js). Targets are in the issues; see the README for how to run.\n');
  fs.appendFileSync(file, lines.join('\n') + '\n');
  console.log(lines.join('\n'));
}

main().catch((e) => { console.error(e); process.exit(1); });
