/* eslint-disable */
// Open-loop load at a fixed offered rate, for the "p99 at a fixed rate" figures.
//
// Why not autocannon's overallRate: it lets each connection send its per-second quota as fast as
// it can at the start of every second (a burst each second) and then corrects for coordinated
// omission with a 1 ms interval, so its p99 measures that burst rather than the service
// (measured here: a hello-world Fastify server shows p99 271 ms at 3,000/s that way).
// Here requests are scheduled evenly (every millisecond, the ones due by then; all of them encoded
// before the run, so the generator does little besides write and read), queued when all
// connections are busy, and each latency is counted from the request's scheduled time, so a
// stalled server shows up in the percentiles instead of hiding (no coordinated omission).
// Measurement starts once every connection is open and after `warmup` seconds at the same rate
// whose answers are not recorded (as wrk2 does with its calibration period): the figures are the
// steady state, not TCP connection set-up and the step from idle to full rate.
const net = require('net');
const hdr = require('hdr-histogram-js');

/**
 * @param {{ url: string, rate: number, duration: number, connections: number, warmup?: number,
 *           request: (i: number) => { method: string, path: string, headers?: Record<string,string>, body?: string },
 *           onResponse?: (status: number, body: string) => void }} o
 */
function openLoop(o) {
  const { hostname, port } = new URL(o.url);
  const hist = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: 3 }); // microseconds
  const idle = [];
  let sent = 0, due = 0, done = 0, non2xx = 0, errors = 0, lastDone = 0;
  const warmup = o.warmup ?? 1;
  let t0 = 0, endAt = 0, measureFrom = 0;
  // BENCH_TIMELINE=1: per 100 ms of scheduled time, the count and worst latency, to tell one stall from spread-out queueing
  const timeline = process.env.BENCH_TIMELINE ? new Map() : null;
  const loopDelay = timeline ? require('perf_hooks').monitorEventLoopDelay({ resolution: 1 }) : null;
  if (loopDelay) loopDelay.enable();
  const encode = (i) => {
    const r = o.request(i);
    const body = r.body ?? '';
    let head = `${r.method} ${r.path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nConnection: keep-alive\r\n`;
    for (const [k, v] of Object.entries(r.headers ?? {})) head += `${k}: ${v}\r\n`;
    if (body || r.method !== 'GET') head += `Content-Length: ${Buffer.byteLength(body)}\r\n`;
    return Buffer.from(head + '\r\n' + body);
  };
  // every request of the run is encoded before it starts: the generator shares the host with the
  // service, so during the run it only writes prepared bytes and reads answers (its own CPU per
  // request is reported beside the service's)
  const planned = Math.ceil((warmup + o.duration) * o.rate) + 1;
  const bytes = Array.from({ length: planned }, (_, i) => encode(i));
  const at = (i) => t0 + (i / o.rate) * 1000; // a request's scheduled time, not its send time
  const sentAt = timeline ? new Float64Array(planned) : null;
  const HEAD_END = Buffer.from('\r\n\r\n');
  return new Promise((resolve) => {
    let opened = 0;
    const conns = Array.from({ length: o.connections }, () => connect());
    function connect() {
      const c = { sock: net.connect({ host: hostname, port: Number(port) }), buf: null, job: -1 };
      c.sock.setNoDelay(true);
      c.sock.on('connect', () => { if (++opened === o.connections && !t0) start(); if (t0) next(c); else idle.push(c); });
      c.sock.on('data', (d) => { c.buf = c.buf ? Buffer.concat([c.buf, d]) : d; parse(c); });
      c.sock.on('error', () => { if (c.job >= 0) { errors++; c.job = -1; } });
      c.sock.on('close', () => { const i = conns.indexOf(c); if (i >= 0 && performance.now() < endAt) conns[i] = connect(); });
      return c;
    }
    /** The Content-Length of a response head (bytes 0..end), 0 without one. */
    function contentLength(buf, end) {
      let k = buf.indexOf('content-length:', 0, 'latin1');
      if (k < 0 || k > end) k = buf.indexOf('Content-Length:', 0, 'latin1');
      if (k < 0 || k > end) return 0;
      let n = 0;
      for (let j = k + 15; j < end; j++) {
        const ch = buf[j];
        if (ch === 32) continue;
        if (ch < 48 || ch > 57) break;
        n = n * 10 + ch - 48;
      }
      return n;
    }
    function parse(c) {
      while (c.buf) {
        const end = c.buf.indexOf(HEAD_END);
        if (end < 0) return;
        const len = contentLength(c.buf, end);
        if (c.buf.length < end + 4 + len) return;
        const status = (c.buf[9] - 48) * 100 + (c.buf[10] - 48) * 10 + (c.buf[11] - 48);
        if (o.onResponse && c.job >= 0) o.onResponse(status, c.buf.toString('utf8', end + 4, end + 4 + len));
        c.buf = c.buf.length === end + 4 + len ? null : c.buf.subarray(end + 4 + len);
        if (c.job >= 0) {
          const now = performance.now();
          const scheduled = at(c.job);
          if (scheduled >= measureFrom) {
            hist.recordValue(Math.max(1, Math.round((now - scheduled) * 1000)));
            if (timeline) {
              const b = Math.floor((scheduled - measureFrom) / 100);
              const e = timeline.get(b) ?? { n: 0, max: 0, slow: 0, wait: 0 };
              e.n++; e.max = Math.max(e.max, now - scheduled); if (now - scheduled > 10) e.slow++;
              e.wait = Math.max(e.wait, sentAt[c.job] - scheduled); // queued in the generator before it was sent
              timeline.set(b, e);
            }
            lastDone = now;
            done++;
            if (status < 200 || status >= 300) non2xx++;
          }
          c.job = -1;
        }
        next(c);
      }
    }
    /** The connection takes the oldest request that is due and not sent, else waits idle. */
    function next(c) {
      if (c.job >= 0) return;
      if (sent >= due) { idle.push(c); return; }
      c.job = sent++;
      if (timeline) sentAt[c.job] = performance.now();
      c.sock.write(bytes[c.job]);
    }
    let warm = 0; // requests scheduled during the warm-up (not counted)
    function start() {
      t0 = performance.now();
      measureFrom = t0 + warmup * 1000;
      endAt = measureFrom + o.duration * 1000;
      warm = Math.ceil(warmup * o.rate);
      schedule();
    }
    function schedule() {
      const timer = setInterval(() => {
        const now = performance.now();
        due = Math.min(planned, Math.floor(((Math.min(now, endAt) - t0) / 1000) * o.rate));
        while (idle.length && sent < due) next(idle.pop());
        if (now >= endAt) {
          clearInterval(timer);
          // wait for what is in flight (bounded), then report
          const stop = setInterval(() => {
            if ((done + errors >= due - warm) || performance.now() > endAt + 5000) {
              clearInterval(stop);
              for (const c of conns) c.sock.destroy();
              const p = (q) => Math.round(hist.getValueAtPercentile(q) / 100) / 10; // ms, 0.1 ms resolution
              // throughput over the time it took to answer them (a saturated server needs longer than the run)
              const seconds = Math.max(o.duration, (lastDone - measureFrom) / 1000);
              if (timeline) {
                const worst = [...timeline.entries()].sort((a, b) => b[1].slow - a[1].slow).slice(0, 15).sort((a, b) => a[0] - b[0]);
                loopDelay.disable();
                process.stderr.write(`generator event-loop delay: p50 ${(loopDelay.percentile(50) / 1e6).toFixed(1)} p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} max ${(loopDelay.max / 1e6).toFixed(1)} ms\n`);
                process.stderr.write(`timeline (${o.rate}/s; 100 ms buckets with most answers over 10 ms): ` + worst.map(([b, e]) => `${(b / 10).toFixed(1)}s (${new Date(performance.timeOrigin + measureFrom + b * 100).toISOString().slice(11, 23)}) n=${e.n} slow=${e.slow} max=${e.max.toFixed(0)} queued=${e.wait.toFixed(0)}`).join(' | ') + '\n');
              }
              resolve({ rps: Math.round(done / seconds), p50: p(50), p90: p(90), p99: p(99), total: done, non2xx, errors: errors + (due - warm - done - errors), offered: o.rate, sentAll: due });
            }
          }, 20);
        }
      }, 1);
    }
  });
}

module.exports = { openLoop };
