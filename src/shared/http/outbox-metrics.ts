import { Gauge, Registry } from 'prom-client';
import { Queryable } from '../db/db.service';

/** The outbox topics (mail, webhook events): each gets its series, 0 when it has no backlog. */
const TOPICS = ['email', 'webhook'] as const;
/** Rows counted at most per scrape and state: a backlog beyond says "at least" this many. */
export const OUTBOX_BACKLOG_SCAN_LIMIT = 100_000;

/**
 * The worker's backlog as the database shows it, read at each scrape by the process that answers
 * (never summed across API processes: it is one database): rows not yet relayed to BullMQ
 * (undispatched: the worker's outbox relay is down or behind) and rows relayed but not yet settled
 * (unsettled: mail not yet sent or given up, a webhook event not yet fanned out), each with the age
 * of its oldest row. Served by the API's /metrics and the worker's (WORKER_HEALTH_PORT); these
 * are what to alert on (docs/scaling.md). Each state reads at most OUTBOX_BACKLOG_SCAN_LIMIT rows through its partial index.
 */
export class OutboxMetrics {
  private readonly registry = new Registry();
  private readonly rows = new Gauge({ name: 'authp_outbox_backlog_rows', help: `Outbox rows waiting, by topic and state (undispatched: not yet relayed to the queue; unsettled: relayed, not yet done); counted up to ${OUTBOX_BACKLOG_SCAN_LIMIT}`, labelNames: ['topic', 'state'] as const, registers: [this.registry] });
  private readonly oldest = new Gauge({ name: 'authp_outbox_backlog_oldest_seconds', help: 'Age of the oldest waiting outbox row, by topic and state (0: none waiting)', labelNames: ['topic', 'state'] as const, registers: [this.registry] });

  /** The exposition text of the backlog gauges, read now (empty when the database does not answer: the rest of the scrape stands). */
  async text(db: Queryable): Promise<string> {
    try {
      const found = await db.query<{ state: string; topic: string; n: number; oldest: number }>(
        `SELECT 'undispatched' AS state, topic, count(*)::int AS n, extract(epoch FROM now() - min(created_at))::float8 AS oldest
           FROM (SELECT topic, created_at FROM outbox WHERE dispatched_at IS NULL ORDER BY id LIMIT $1) u GROUP BY topic
         UNION ALL
         SELECT 'unsettled', topic, count(*)::int, extract(epoch FROM now() - min(dispatched_at))::float8
           FROM (SELECT topic, dispatched_at FROM outbox WHERE dispatched_at IS NOT NULL AND processed_at IS NULL ORDER BY id LIMIT $1) s GROUP BY topic`,
        [OUTBOX_BACKLOG_SCAN_LIMIT],
      );
      for (const state of ['undispatched', 'unsettled']) {
        for (const topic of TOPICS) {
          const r = found.find((x) => x.state === state && x.topic === topic);
          this.rows.labels(topic, state).set(r?.n ?? 0);
          this.oldest.labels(topic, state).set(r ? Math.max(0, r.oldest) : 0);
        }
      }
      return await this.registry.metrics();
    } catch {
      return '';
    }
  }
}
