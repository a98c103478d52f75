import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { BearerAuthenticator, BearerCallLimiter } from '../../shared/auth/bearer.strategy';
import { AccessClaims } from '../../shared/crypto/jwt.service';
import { Db } from '../../shared/db/db.service';
import { RateLimitedError } from '../../shared/errors/app-error';
import { EventsService } from '../../shared/events/events.service';
import { RateLimitService } from '../../shared/rate-limit/rate-limit.service';
import { WEBHOOK_TOPIC } from './agent-events';
import { AGENT_LIMIT_BUCKETS, agentLimitKey, AgentsService, RATE_LIMIT_OAUTH_AGENT_CEILING } from './agents.service';
import { UUID } from '../../shared/uuid';

const WINDOW_SECONDS = 60;
const BUCKET = AGENT_LIMIT_BUCKETS.api_calls_per_min!;
/** Agents remembered per process; past it the memory starts over (a few Redis reads refill it). */
const MAX_ENTRIES = 10_000;

interface Entry {
  /** 0: no api_calls_per_min (nothing counted) */
  limit: number;
  tenantId: string;
  expiresAt: number;
}

/** The effective per-minute limit of an override: 0 for none, else at most the ceiling (spec 8). */
export function apiCallsLimit(override: unknown): number {
  return Number.isInteger(override) && (override as number) > 0 ? Math.min(override as number, RATE_LIMIT_OAUTH_AGENT_CEILING) : 0;
}

/**
 * spec 2.10 / 8 `agent_settings.rate_limits.api_calls_per_min`: bearer calls made with an agent's
 * tokens (claims `act.sub`), counted per agent client per minute across all its tokens and users
 * (RateLimitService, bucket `agent_api_calls`); beyond it 429 `rate_limit/exceeded` and
 * `agent.rate_limited` (limit_scope `api_calls`, audit and webhook, once per window).
 *
 * The agent's limit comes from a small in-process memory (AGENT_LIMITS_LOCAL_TTL_SECONDS, filled
 * from the cached agent row, AgentsService.findClient), so an agent without the limit costs the
 * bearer path no Redis or PostgreSQL work. For an agent with it the call is counted only once the
 * token is otherwise accepted (after the revocation MGET: one more round trip), so a revoked or
 * killed token never uses up the agent's calls; a refusal costs one more (the first-refusal
 * marker, and re-reading the agent's limit). A PATCH of the limit takes effect within that TTL; a
 * raised or removed one at once (a refusal re-reads it before refusing).
 */
@Injectable()
export class AgentApiLimitService implements OnModuleInit, BearerCallLimiter {
  private readonly entries = new Map<string, Entry>();
  private readonly loading = new Map<string, Promise<Entry>>();

  constructor(
    private readonly bearer: BearerAuthenticator,
    private readonly agents: AgentsService,
    private readonly limiter: RateLimitService,
    private readonly events: EventsService,
    private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.bearer.registerCallLimiter(this);
  }

  prepare(claims: AccessClaims): Promise<(() => Promise<void>) | null> | undefined {
    const agentId = claims.act?.sub;
    if (typeof agentId !== 'string') return undefined;
    const e = this.entries.get(agentId);
    if (e && e.expiresAt > Date.now()) return e.limit && e.tenantId === claims.tenant_id ? Promise.resolve(() => this.count(agentId, e, claims)) : undefined;
    return this.load(agentId).then((loaded) => (loaded.limit && loaded.tenantId === claims.tenant_id ? () => this.count(agentId, loaded, claims) : null));
  }

  /** Counts an accepted call; over the agent's current limit 429, the first refusal of the window recorded. */
  private async count(agentId: string, e: Entry, claims: AccessClaims): Promise<void> {
    const key = agentLimitKey(agentId);
    let r = await this.limiter.hit(BUCKET, key, e.limit, WINDOW_SECONDS);
    if (r.allowed) return;
    // the limit remembered here may be older than a PATCH that raised or removed it (in this or
    // another process): judged by the agent's current limit, a block the window's count does not
    // justify (set by an old limit) is lifted and the call counted again under the current limit,
    // so a raised limit never costs the agent a block of a full window. A block whose window has
    // rolled over (count 0) is the one the agent earned and was told about: it runs its course.
    const current = await this.reload(agentId);
    if (current.tenantId === e.tenantId && r.count > 0 && (current.limit === 0 || r.count <= current.limit)) {
      await this.limiter.unblock(BUCKET, [key]);
      if (current.limit === 0) return;
      r = await this.limiter.hit(BUCKET, key, current.limit, WINDOW_SECONDS);
      if (r.allowed) return;
    }
    // one event per refusal window whatever the counts (a limit lowered mid-window starts past limit + 1)
    if (await this.limiter.firstRefusal(BUCKET, key)) await this.record(agentId, current, claims, r.retryAfterSeconds);
    throw new RateLimitedError(BUCKET, r.retryAfterSeconds);
  }

  /** The agent's limit read again from the cached agent row (which a PATCH invalidates), not from this process's memory. */
  private reload(agentId: string): Promise<Entry> {
    const e = this.entries.get(agentId);
    if (e) e.expiresAt = 0;
    return this.load(agentId);
  }

  /** The agent's limit from the cached agent row (one load per agent at a time). */
  private load(agentId: string): Promise<Entry> {
    let p = this.loading.get(agentId);
    if (p) return p;
    p = (async () => {
      const row = UUID.test(agentId) ? await this.agents.findClient(agentId) : null;
      const entry: Entry = {
        limit: row ? apiCallsLimit(row.rate_limits?.api_calls_per_min) : 0,
        tenantId: row?.tenant_id ?? '',
        expiresAt: Date.now() + this.config.AGENT_LIMITS_LOCAL_TTL_SECONDS * 1000,
      };
      if (this.config.AGENT_LIMITS_LOCAL_TTL_SECONDS > 0) {
        if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
        this.entries.set(agentId, entry);
      }
      return entry;
    })().finally(() => this.loading.delete(agentId));
    this.loading.set(agentId, p);
    return p;
  }

  /** spec 6 agent.rate_limited: audit (offending scope, computed limit) and webhook, one transaction. */
  private async record(agentId: string, e: Entry, claims: AccessClaims, retryAfterSeconds: number): Promise<void> {
    const payload = { agent_client_id: agentId, limit_scope: 'api_calls', computed_limit: e.limit, window_seconds: WINDOW_SECONDS };
    await this.events.auditAndOutbox(
      this.db,
      {
        tenantId: e.tenantId,
        type: 'agent.rate_limited',
        actorType: 'agent',
        actorId: agentId,
        targetType: 'agent_client',
        targetId: agentId,
        severity: 'medium',
        metadata: { ...payload, rate_limit_key: 'api_calls_per_min', retry_after_seconds: retryAfterSeconds, user_id: claims.sub },
      },
      { tenantId: e.tenantId, topic: WEBHOOK_TOPIC, eventType: 'agent.rate_limited', payload },
    );
  }
}
