import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { ClientHasher } from '../../../shared/crypto/client-hash';
import { AccessClaims, JwtService, pastSecondOf } from '../../../shared/crypto/jwt.service';
import { hashPrefix } from '../../../shared/crypto/tokens';
import { Batcher } from '../../../shared/db/batcher';
import { Db } from '../../../shared/db/db.service';
import { OAuthError } from '../../../shared/errors/oauth-error';
import { AuditEvent, EventsService, OutboxMessage, Severity } from '../../../shared/events/events.service';
import { countRateLimited, countTokenExchange, TokenExchangeOutcome } from '../../../shared/http/metrics';
import { RateLimitService } from '../../../shared/rate-limit/rate-limit.service';
import { AgentDenylistService } from '../../agents/agent-denylist.service';
import { MFA_ENROLLMENT_DEADLINE_SQL, SESSION_TOO_OLD_SQL } from '../../sessions/sessions.service';
import { AgentTokenSlotsService, CONCURRENCY_EVENT_WINDOW_SECONDS } from '../../agents/agent-token-slots.service';
import { AGENT_LIMIT_BUCKETS, AgentActionInput, AgentClientRow, agentLimitKey, AgentsService, RATE_LIMIT_OAUTH_AGENT_CEILING } from '../../agents/agents.service';
import { ClientAuthenticator, ClientCaller, invalidClient } from '../client-auth/client-authenticator.service';
import {
  ACCESS_TOKEN_TYPE,
  AGENT_TOKEN_DEFAULT_TTL_SECONDS,
  AGENT_TOKEN_MAX_TTL_SECONDS,
  TOKEN_EXCHANGE_GRANT,
  TOKEN_EXCHANGE_PER_CLIENT_PER_MIN,
  TOKEN_EXCHANGE_PER_SUBJECT_JTI_PER_MIN,
} from '../oauth.constants';
import { failClosed, slowDown } from '../oauth-errors';
import { FormParams } from '../oauth-form';
import { ExchangeTokenCommand, TokenExchangeResponse } from './exchange-token.command';
import { SubjectInvalidReason, SubjectTokenRejected, SubjectTokenValidator, unverifiedJti } from './subject-token';

/** RFC 6749 section 3.3 scope-token: %x21 / %x23-5B / %x5D-7E. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
/**
 * An absolute URI (RFC 3986 section 4.3: scheme ":" hier-part [ "?" query ], no fragment) for
 * `audience`, by its characters: ASCII unreserved, sub-delims, ":", "@", "/", "?", the brackets of
 * an IP literal and well-formed percent-encodings only (no fragment, no backslash, no controls, no
 * invisible or other non-ASCII characters: it is copied into the signed token and the audit trail).
 */
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?[\]]|%[0-9A-Fa-f]{2})+$/;
const MAX_AUDIENCES = 5;
/** $1-$9 of the issuing statement: agents, grant type, sessions, users, tenants, client secret hashes, iats, session max age, agent versions */
const GUARD_PARAMS = 9;
const MAX_SUBJECT_TOKEN_LENGTH = 16_384;
/** spec 8 per-client exchange counter of clients that are not agents (every request is refused) */
const NON_AGENT_BUCKET = 'token_exchange_non_agent';

interface ExchangeRequest {
  subjectToken: string;
  /** requested scope tokens, undefined when `scope` was omitted */
  scope?: string[];
  audience: string[];
  requestedTtl?: number;
}

interface IssueFlags {
  agent_active: boolean;
  grant_ok: boolean;
  session_ok: boolean;
  /** the session is live but past SESSION_MAX_AGE_SECONDS */
  session_too_old: boolean;
  pair_ok: boolean;
  /** the agent row is the version the exchange read (no PATCH of its scopes, lifetime or limits since) */
  agent_current: boolean;
  /** the pair is not withdrawn now, but was restored at or after the token's iat second */
  pair_restored_late: boolean;
  /** the tenant requires MFA and the user's enrollment grace is over (spec 2.8): nothing is issued */
  enrollment_enforced: boolean;
}

/** What one exchange writes, and the guards it is written under. */
interface Issuance {
  agentId: string;
  /** the client secret's hash the caller authenticated with: refused if the secret changed since */
  secretHash: string;
  sessionId: string;
  userId: string;
  tenantId: string;
  /** the token's iat: refused when the user restored the pair at or after it (see issueMany) */
  iat: number;
  /** the agent_metadata_version the scope and lifetime were computed from: refused if a PATCH came since */
  agentVersion: number;
  audit: AuditEvent;
  outbox: OutboxMessage;
  action: AgentActionInput;
}

/**
 * RFC 8693 token exchange for agent clients (spec 4.3, 5, 6, 7.5, 8): a user's access token
 * becomes a short-lived, narrowed agent token whose `act.sub` is the agent and whose `sub` stays
 * the user. Every refusal of the subject token is invalid_grant with a generic description; the
 * precise reason goes only to the audit record.
 */

/** The issuing statement found the agent row changed since the exchange read it (IssueFlags.agent_current). */
class AgentChanged extends Error {}

/**
 * authp_token_exchange_total's outcome of a refused exchange, by its RFC 6749 error: the spec 6
 * event of the refusal where it has one (invalid_grant: oauth.token_exchange.subject_invalid,
 * the subject token refused, revoked or its pair withdrawn; invalid_scope: scope_denied;
 * slow_down: rate_limited; unauthorized_client: client_unauthorized), else what went wrong
 * (client authentication, the request's parameters, a store away, anything else).
 */
function exchangeOutcome(err: unknown): TokenExchangeOutcome {
  if (!(err instanceof OAuthError)) return 'error';
  switch (err.error) {
    case 'invalid_grant':
      return 'subject_invalid';
    case 'invalid_scope':
      return 'scope_denied';
    case 'slow_down':
      return 'rate_limited';
    case 'unauthorized_client':
      return 'client_unauthorized';
    case 'invalid_client':
      return 'client_invalid';
    case 'invalid_request':
    case 'invalid_target':
    case 'unsupported_grant_type':
      return 'invalid_request';
    case 'temporarily_unavailable':
      return 'unavailable';
    default:
      return 'error';
  }
}

/** A request's limits when it runs again after a kill-second wait: counted, and let through, on its first run. */
const COUNTED = { allowed: true, count: 0, retryAfterSeconds: 0 } as const;

@CommandHandler(ExchangeTokenCommand)
export class ExchangeTokenHandler implements ICommandHandler<ExchangeTokenCommand, TokenExchangeResponse> {
  private readonly issuer: Batcher<Issuance, IssueFlags>;

  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly jwt: JwtService,
    private readonly clients: ClientAuthenticator,
    private readonly subjects: SubjectTokenValidator,
    private readonly limiter: RateLimitService,
    private readonly revocation: TokenRevocationService,
    private readonly agents: AgentsService,
    private readonly denylist: AgentDenylistService,
    private readonly slots: AgentTokenSlotsService,
    private readonly hasher: ClientHasher,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.issuer = new Batcher((items) => this.issueMany(items), async (item) => (await this.issueMany([item]))[0], {
      name: 'token_exchange_issue',
      maxBatch: 64,
      maxInFlight: 2,
    });
  }

  async execute(cmd: ExchangeTokenCommand): Promise<TokenExchangeResponse> {
    try {
      const issued = await this.exchange(cmd);
      countTokenExchange('issued');
      return issued;
    } catch (e) {
      try {
        return failClosed(e);
      } catch (answered) {
        const outcome = exchangeOutcome(answered);
        countTokenExchange(outcome);
        // its limits (per client, per subject token, concurrent tokens) refuse in the RFC 6749 envelope, not through RateLimitService.enforce
        if (outcome === 'rate_limited') countRateLimited('token_exchange');
        throw answered;
      }
    }
  }

  /** `waited`: this is the exchange run again, after waiting out a kill's second or after its agent changed (see below). */
  private async exchange(cmd: ExchangeTokenCommand, waited = false): Promise<TokenExchangeResponse> {
    const { form, authorization, client } = cmd;
    // RFC 6749 section 3.2.1: authenticate the client (HTTP Basic or body, never both)
    const caller = await this.clients.authenticate(form, authorization);
    // spec 5 rule 2: confidential agent clients only (clientType check). A grant this server does
    // not support at all is unsupported_grant_type whoever asks (RFC 6749 section 5.2).
    if (caller.kind !== 'agent') {
      assertTokenExchangeGrant(form);
      // spec 8's per-client limit holds for every client: a public client authenticates by its id
      // alone (shipped in apps), so unlimited, its refusals would write audit and webhook rows
      // without end. Counted per client; the first request of each window records the event.
      const r = await this.limiter.hit(NON_AGENT_BUCKET, `oauth_client:${caller.clientId}`, TOKEN_EXCHANGE_PER_CLIENT_PER_MIN, 60);
      if (!r.allowed) throw slowDown(r.retryAfterSeconds, 'token exchanges');
      const reason = caller.kind === 'oauth_client' && !caller.confidential ? 'public_client' : 'not_agent_client';
      if (r.count === 1) await this.clientUnauthorized(caller, reason, presentedJtiPrefix(form));
      throw new OAuthError('unauthorized_client', 'Only confidential agent clients may use token exchange');
    }
    const agent = caller.agent;

    // spec 8: 60 exchanges per minute per agent client (or its override, at most 600). Every
    // request of the client counts, and its refusal comes before any other answer.
    const override = agent.rate_limits?.token_exchange_per_min;
    const clientLimit = Number.isInteger(override) && override! > 0 ? Math.min(override!, RATE_LIMIT_OAUTH_AGENT_CEILING) : TOKEN_EXCHANGE_PER_CLIENT_PER_MIN;
    const perClientLimit = { bucket: AGENT_LIMIT_BUCKETS.token_exchange_per_min!, key: agentLimitKey(agent.id), limit: clientLimit, windowSeconds: 60 };
    const clientRefused = async (r: { retryAfterSeconds: number }) =>
      this.rateLimited(agent, 'agent_client', clientLimit, await this.windowRefusal(r, perClientLimit.bucket, perClientLimit.key), form, presentedJtiPrefix(form));

    // the checks that need neither Redis nor PostgreSQL decide first; a refusal of theirs (and its
    // audit event) is answered once the per-client limit has counted the request
    const checked = await this.checkRequest(caller, agent, form);
    if (!checked.ok) {
      // (a request run again after a kill-second wait was counted on its first run)
      const perClient = waited ? COUNTED : await this.limiter.hit(perClientLimit.bucket, perClientLimit.key, clientLimit, 60);
      if (!perClient.allowed) throw await clientRefused(perClient);
      throw await checked.refusal();
    }
    const { req, subject } = checked;

    // spec 8 per-client limit, then per-jti limit (not counted once the client is refused); spec
    // 4.3 revocation (session, revoked jti); spec 3.2 denylist: one Redis round trip. All fail
    // closed when Redis is unreachable. The user's withdrawal (spec 3.3) is a guard of the
    // issuing statement itself (pair_ok), read in PostgreSQL in the same snapshot as the writes.
    const nowSec = Math.floor(Date.now() / 1000);
    const [[perClient, perJti], revokedReason, denied] = await Promise.all([
      waited
        ? [COUNTED, COUNTED]
        : this.limiter.hitInOrder([perClientLimit, { bucket: 'token_exchange_jti', key: `jti:${subject.jti}`, limit: TOKEN_EXCHANGE_PER_SUBJECT_JTI_PER_MIN, windowSeconds: 60 }]),
      this.revocation.revokedReason(subject),
      this.denylist.isDenied(agent.id, nowSec),
    ]);
    if (!perClient.allowed) throw await clientRefused(perClient);
    if (!perJti.allowed) {
      // the subject token's limit counts every agent's exchanges; each agent it refuses records its
      // own event (spec 6: webhooks filtered by agent_client_id), once per window
      const r = await this.windowRefusal(perJti, 'token_exchange_jti', `jti:${subject.jti}`, agent.id);
      throw await this.rateLimited(agent, 'subject_token_jti', TOKEN_EXCHANGE_PER_SUBJECT_JTI_PER_MIN, r, form, hashPrefix(subject.jti));
    }
    if (denied) {
      // waits out the kill's second, or throws (revoked; refused again after the wait, or in the
      // exchange run again after it: a second kill, 503 with no second wait)
      await this.afterKillSecond(caller, agent, !waited);
      // the wait took up to a second: what was read before it (the client and its settings, the
      // subject token's revocation, the limits) is read again, as for a request arriving now. A
      // PATCH narrowing the agent's scopes or lifetime, or an RFC 7009 revocation of the subject
      // token, that returned during the wait is not overtaken (the limits, which counted this
      // request and let it through, are not counted again)
      return this.exchange(cmd, true);
    }
    if (revokedReason) {
      const reason: SubjectInvalidReason = revokedReason === 'session_revoked' ? 'session_revoked' : 'token_revoked';
      throw await this.subjectInvalid(agent, new SubjectTokenRejected(reason, subject.jti, subject.sub));
    }

    // RFC 8693 section 2.1 scope, RFC 6749 section 3.3: requested ∩ subject ∩ agent allowlist,
    // and within the tenant's user scopes of now (contract "Tokens"): a subject token signed before
    // the owner removed a scope (it lives up to its exp) does not hand that scope on
    const subjectScope = splitScope(subject.scope); // a string: SubjectTokenValidator checked the claim shapes
    const tenantScopes = agent.tenant_user_scopes === undefined ? undefined : new Set(splitScope(agent.tenant_user_scopes));
    const allow = new Set(agent.scopes.filter((s) => !tenantScopes || tenantScopes.has(s)));
    const have = new Set(subjectScope);
    const granted = dedupe(req.scope ?? subjectScope).filter((s) => have.has(s) && allow.has(s));
    if (!granted.length) {
      // a withdrawn pair answers as such whatever the scope (the issuing statement says so otherwise)
      if (await this.denylist.isUserRevoked(agent.tenant_id, subject.sub, agent.id)) {
        throw await this.subjectInvalid(agent, new SubjectTokenRejected('agent_revoked_by_user', subject.jti, subject.sub));
      }
      await this.audit(agent, 'oauth.token_exchange.scope_denied', 'low', {
        subject_token_jti_hash_prefix: hashPrefix(subject.jti),
        requested_scope: (req.scope ?? subjectScope).join(' '),
      }, subject.sub);
      throw new OAuthError('invalid_scope', 'None of the requested scopes can be granted to this client');
    }
    const scope = granted.join(' ');

    // spec 8: TTL = min(requested or 300, agent max, 900)
    const ttl = Math.min(req.requestedTtl ?? AGENT_TOKEN_DEFAULT_TTL_SECONDS, agent.agent_token_max_ttl_sec, AGENT_TOKEN_MAX_TTL_SECONDS);

    // RFC 8693 section 4.1: the actor is the authenticated client; contract "Tokens": no sid, amr + tx
    const { amr } = subject;
    const { token, claims } = await this.jwt.sign(
      {
        sub: subject.sub,
        tenant_id: agent.tenant_id,
        scope,
        amr: amr.includes('tx') ? amr : [...amr, 'tx'],
        aal: subject.aal,
        // when the user authenticated, as amr and aal: the subject's (absent from a token minted before it was a claim)
        ...(typeof subject.auth_time === 'number' ? { auth_time: subject.auth_time } : {}),
        role: subject.role,
        is_anonymous: false,
        act: { sub: agent.id },
        // RFC 9068 section 2.2 (and RFC 8693 section 4.3): the client the token was issued to
        client_id: agent.id,
        // the token ends with the subject's session (no sid: it is no session's token)
        subject_sid: subject.sid as string,
        ...(req.audience.length ? { aud: req.audience.length === 1 ? req.audience[0] : req.audience } : {}),
      },
      ttl,
    );

    // spec 2.10 max_concurrent_tokens: a slot per unexpired token of the agent (across users),
    // taken atomically before issuing and given back if the issuance does not happen
    const maxLive = agent.max_concurrent_tokens;
    if (maxLive) {
      const slot = await this.slots.acquire(agent.id, maxLive, claims.jti, claims.exp);
      if (!slot.acquired) {
        throw await this.rateLimited(agent, 'max_concurrent_tokens', maxLive, { first: slot.firstInWindow, retryAfterSeconds: slot.retryAfterSeconds }, form, hashPrefix(subject.jti));
      }
    }
    try {
      await this.issue(caller, agent, subject, claims, scope, client);
    } catch (e) {
      if (maxLive) await this.slots.release(agent.id, claims.jti);
      if (!(e instanceof AgentChanged)) throw e;
      // nothing was issued: the request runs again with the agent as it is now (its limits, which
      // counted it and let it through, not counted again), as after a kill-second wait. Changed
      // again (or its cached row not yet told of the change): 503, to be sent again
      if (waited) throw new OAuthError('temporarily_unavailable', 'The agent was just changed; retry shortly', 503, { 'Retry-After': '1' });
      return this.exchange(cmd, true);
    }

    // RFC 8693 section 2.2.1: the response (Cache-Control: no-store set by the controller)
    return { access_token: token, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: ttl, scope };
  }

  /**
   * The checks of an agent's exchange request that need neither Redis nor PostgreSQL, in the order
   * they answer: the grant type (RFC 6749 section 4.1.3); Pro tier or higher and the grant type in
   * the agent's allowlist, which disable clears (spec 5 rules 2-3, 3.2); the request parameters
   * (RFC 8693 section 2.1); the stateless checks of the subject token (spec 4.3). A refusal is
   * returned, not thrown: its audit event is written only when it is the answer.
   */
  private async checkRequest(
    caller: ClientCaller,
    agent: AgentClientRow,
    form: FormParams,
  ): Promise<{ ok: true; req: ExchangeRequest; subject: AccessClaims } | { ok: false; refusal: () => Promise<Error> }> {
    const refuse = (refusal: () => Promise<Error>) => ({ ok: false as const, refusal });
    const unauthorized = (reason: string, description: string) =>
      refuse(async () => {
        await this.clientUnauthorized(caller, reason, presentedJtiPrefix(form));
        return new OAuthError('unauthorized_client', description);
      });
    let req: ExchangeRequest;
    try {
      assertTokenExchangeGrant(form);
      if (agent.tenant_tier === 'free') return unauthorized('tier_below_pro', 'Agent clients require the Pro tier or higher');
      if (agent.disabled_at || !agent.grant_types.includes(TOKEN_EXCHANGE_GRANT)) {
        return unauthorized(agent.disabled_at ? 'client_disabled' : 'grant_type_not_allowed', 'The client is not allowed to use the token-exchange grant');
      }
      req = this.readRequest(form);
    } catch (e) {
      if (!(e instanceof OAuthError)) throw e;
      return refuse(async () => e);
    }
    try {
      return { ok: true, req, subject: await this.subjects.validate(req.subjectToken, agent.tenant_id) };
    } catch (e) {
      if (e instanceof SubjectTokenRejected) return refuse(() => this.subjectInvalid(agent, e));
      throw e;
    }
  }

  /** RFC 8693 section 2.1 parameters; everything spec 4.3 rejects is rejected here. */
  private readRequest(form: FormParams): ExchangeRequest {
    // spec 4.3: resource is not supported (RFC 8693 section 2.2.2 invalid_target)
    if (form.has('resource')) throw new OAuthError('invalid_target', 'The resource parameter is not supported; use audience');
    // spec 4.3: the actor is derived from the authenticated client
    if (form.has('actor_token') || form.has('actor_token_type')) throw new OAuthError('invalid_request', 'actor_token is not supported; the actor is the authenticated client');
    const subjectToken = form.get('subject_token');
    if (!subjectToken) throw new OAuthError('invalid_request', 'subject_token is required');
    if (subjectToken.length > MAX_SUBJECT_TOKEN_LENGTH) throw new OAuthError('invalid_request', 'subject_token is too long');
    const subjectType = form.get('subject_token_type');
    if (!subjectType) throw new OAuthError('invalid_request', 'subject_token_type is required');
    if (subjectType !== ACCESS_TOKEN_TYPE) throw new OAuthError('invalid_request', `subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
    const requestedType = form.get('requested_token_type');
    if (requestedType !== undefined && requestedType !== ACCESS_TOKEN_TYPE) throw new OAuthError('invalid_request', `requested_token_type must be ${ACCESS_TOKEN_TYPE}`);

    const scope = requestedScope(form.get('scope'));
    // RFC 8693 section 2.1: audience may be repeated; spec 4.3: a target service URI
    const audience = [...new Set(form.all('audience'))];
    if (audience.length > MAX_AUDIENCES || audience.some((a) => a.length > 2048 || !ABSOLUTE_URI.test(a))) {
      throw new OAuthError('invalid_target', 'audience must be one (or a few) absolute URIs of the target service');
    }
    // extension: a requested lifetime (spec 8 "requested or 300"), capped by the agent and 900 s
    const rawTtl = form.get('expires_in');
    let requestedTtl: number | undefined;
    if (rawTtl !== undefined) {
      if (!/^[1-9]\d{0,5}$/.test(rawTtl)) throw new OAuthError('invalid_request', 'expires_in must be a positive integer of seconds');
      requestedTtl = Number(rawTtl);
    }
    return { subjectToken, scope, audience, requestedTtl };
  }

  /**
   * One statement: the audit event, the webhook (outbox) and the activity row, written only
   * if the agent is still active with the secret the caller authenticated with and holds the grant, the subject's session is live and the user
   * has not withdrawn the agent at that instant (spec 3.2, 3.3: a revoke that has returned is
   * never followed by an issuance; PostgreSQL decides, so a Redis flush changes nothing).
   * Concurrent exchanges of a process share one statement (Batcher), each row under its own guards.
   */
  private async issue(caller: Extract<ClientCaller, { kind: 'agent' }>, agent: AgentClientRow, subject: AccessClaims, claims: AccessClaims, scope: string, client: { ip: string; userAgent: string }): Promise<void> {
    const audience = claims.aud;
    const expiresAt = new Date(claims.exp * 1000).toISOString();
    const issuedAt = new Date(claims.iat * 1000).toISOString();
    const jtiPrefix = hashPrefix(claims.jti);
    const subjectJtiPrefix = hashPrefix(subject.jti);
    const flags = await this.issuer.submit({
      agentId: agent.id,
      secretHash: agent.secret_hash,
      sessionId: subject.sid as string,
      userId: subject.sub,
      tenantId: agent.tenant_id,
      iat: claims.iat,
      agentVersion: agent.agent_metadata_version,
      audit: {
        tenantId: agent.tenant_id,
        type: 'oauth.token_exchange.issued',
        actorType: 'agent',
        actorId: agent.id,
        targetType: 'user',
        targetId: subject.sub,
        severity: 'info',
        metadata: {
          agent_client_id: agent.id,
          subject_token_jti_hash_prefix: subjectJtiPrefix,
          jti_hash_prefix: jtiPrefix,
          scope,
          audience,
          expires_at: expiresAt,
          auth_method: caller.method,
          ip_hash_prefix: this.hasher.optional(client.ip),
        },
      },
      outbox: {
        tenantId: agent.tenant_id,
        topic: 'webhook',
        eventType: 'oauth.token_exchange.issued',
        payload: {
          agent_client_id: agent.id,
          user_id: subject.sub,
          scope,
          audience,
          jti_hash_prefix: jtiPrefix,
          subject_token_jti_hash_prefix: subjectJtiPrefix,
          issued_at: issuedAt,
          expires_at: expiresAt,
        },
      },
      action: {
        tenantId: agent.tenant_id,
        agentClientId: agent.id,
        action: 'token_exchange',
        actorUserId: subject.sub,
        resource: Array.isArray(audience) ? audience.join(' ') : audience,
        methodOrEvent: 'POST /oauth/token',
        jti: claims.jti,
        scopeUsed: scope,
        ip: client.ip,
        userAgent: client.userAgent || null,
      },
    });
    if (flags.agent_active && flags.grant_ok && flags.agent_current && flags.session_ok && flags.pair_ok && !flags.enrollment_enforced) return;
    // the final conditional write lost a race with a revocation (spec 3.2: nothing issued after it)
    if (!flags.agent_active) throw invalidClient();
    if (!flags.grant_ok) {
      await this.clientUnauthorized(caller, 'client_disabled', subjectJtiPrefix);
      throw new OAuthError('unauthorized_client', 'The client is not allowed to use the token-exchange grant');
    }
    // a PATCH of the agent committed after its row was read: the scope and lifetime may be ones it
    // took away (see exchange, which runs the request again)
    if (!flags.agent_current) throw new AgentChanged();
    if (flags.session_ok && flags.enrollment_enforced) {
      throw await this.subjectInvalid(agent, new SubjectTokenRejected('mfa_enrollment_required', subject.jti, subject.sub));
    }
    // signed in the second the user restored the pair: a token introspection would call inactive;
    // nothing is wrong with the request, so it is to be sent again (the next second's token is live)
    if (flags.session_ok && flags.pair_restored_late) {
      throw new OAuthError('temporarily_unavailable', "The user just restored this agent's access; retry shortly", 503, { 'Retry-After': '1' });
    }
    const reason = flags.session_ok ? 'agent_revoked_by_user' : flags.session_too_old ? 'session_max_age' : 'session_revoked';
    throw await this.subjectInvalid(agent, new SubjectTokenRejected(reason, subject.jti, subject.sub));
  }

  /**
   * The issuing statement for one or several exchanges: guard flags per exchange read in the same
   * snapshot as the inserts, which are conditional on them (a revoke committed before it starts is
   * seen; one committing later is later than this issuance). No explicit transaction: no BEGIN
   * and COMMIT round trips. A pair the user restored at or after the token's iat (second) is
   * refused too: the token was signed before that restore committed, and introspection tells the
   * tokens a withdrawal ended from later ones by iat against restored_at, so issuing it would hand
   * out a token reported inactive; the exchange counts as one made before the restore.
   */
  private async issueMany(items: Issuance[]): Promise<IssueFlags[]> {
    const ok = '(SELECT ok FROM g WHERE g.ord = r.ord)';
    const [auditSql, ap] = this.events.auditRowsSql(items.map((i) => i.audit), GUARD_PARAMS + 1, ok);
    const [outboxSql, op] = this.events.outboxRowsSql(items.map((i) => i.outbox), GUARD_PARAMS + 1 + ap.length, ok);
    const [actionSql, xp] = this.agents.recordActionsSql(items.map((i) => i.action), GUARD_PARAMS + 1 + ap.length + op.length, ok);
    const rows = await this.db.query<IssueFlags & { ord: string }>(
      `WITH i AS (
         SELECT * FROM unnest($1::uuid[], $3::uuid[], $4::uuid[], $5::uuid[], $6::text[], $7::float8[], $9::int[]) WITH ORDINALITY AS i(agent_id, session_id, user_id, tenant_id, secret_hash, iat, agent_version, ord)
       ), f AS (
         SELECT i.ord,
                COALESCE(ac.revoked_at IS NULL AND ac.secret_hash = i.secret_hash, false) AS agent_active,
                COALESCE(ac.disabled_at IS NULL AND $2 = ANY (ac.grant_types), false) AS grant_ok,
                COALESCE(ac.agent_metadata_version = i.agent_version, false) AS agent_current,
                -- the live session's one row: past SESSION_MAX_AGE_SECONDS it issues nothing either
                -- (NULL: ended or unknown)
                (SELECT ${SESSION_TOO_OLD_SQL('s', 'u', '$8')} FROM user_sessions s JOIN users u ON u.id = s.user_id
                  WHERE s.id = i.session_id AND s.user_id = i.user_id AND s.tenant_id = i.tenant_id AND s.revoked_at IS NULL) AS session_too_old,
                -- the pair's one revocation row (primary key), read once for both flags
                COALESCE(v.revoked_at IS NULL AND NOT coalesce(v.restored_at >= to_timestamp(i.iat), false), true) AS pair_ok,
                COALESCE(v.revoked_at IS NULL AND v.restored_at >= to_timestamp(i.iat), false) AS pair_restored_late,
                -- as refresh and step-up: once the user's MFA enrollment grace is over, the session
                -- yields no new tokens, an agent's neither
                coalesce((SELECT ${MFA_ENROLLMENT_DEADLINE_SQL('t', 'u')} <= now() FROM users u JOIN tenants t ON t.id = u.tenant_id
                  WHERE u.id = i.user_id AND u.tenant_id = i.tenant_id), false) AS enrollment_enforced
           FROM i LEFT JOIN agent_clients ac ON ac.id = i.agent_id
           LEFT JOIN agent_user_revocations v ON v.tenant_id = i.tenant_id AND v.user_id = i.user_id AND v.agent_client_id = i.agent_id
       ), g AS (
         SELECT *, agent_active AND grant_ok AND agent_current AND coalesce(NOT session_too_old, false) AND pair_ok AND NOT enrollment_enforced AS ok FROM f
       ), a AS (${auditSql} RETURNING 1), o AS (${outboxSql} RETURNING 1), x AS (${actionSql} RETURNING 1)
       SELECT ord, agent_active, grant_ok, agent_current, coalesce(NOT session_too_old, false) AS session_ok, coalesce(session_too_old, false) AS session_too_old, pair_ok, pair_restored_late, enrollment_enforced
         FROM g ORDER BY ord`,
      [
        items.map((i) => i.agentId),
        TOKEN_EXCHANGE_GRANT,
        items.map((i) => i.sessionId),
        items.map((i) => i.userId),
        items.map((i) => i.tenantId),
        items.map((i) => i.secretHash),
        items.map((i) => i.iat),
        this.config.SESSION_MAX_AGE_SECONDS,
        items.map((i) => i.agentVersion),
        ...ap,
        ...op,
        ...xp,
      ],
      'oauth_token_exchange_issue_batch',
    );
    const byOrd = new Map(rows.map(({ ord, ...flags }) => [Number(ord), flags]));
    return items.map((_, k) => {
      const flags = byOrd.get(k + 1);
      // never guess another exchange's answer: a missing row fails the batch (each call retried alone)
      if (!flags) throw new Error('token exchange batch: missing guard row');
      return flags;
    });
  }

  /**
   * A fixed-window counter's refusal: the first refused request of the refusal window records it
   * (RateLimitService.firstRefusal, whatever the count: an agent's token_exchange_per_min lowered
   * mid-window leaves the count past limit + 1).
   */
  private async windowRefusal(r: { retryAfterSeconds: number }, bucket: string, key: string, who?: string): Promise<{ first: boolean; retryAfterSeconds: number }> {
    return { first: await this.limiter.firstRefusal(bucket, key, who), retryAfterSeconds: r.retryAfterSeconds };
  }

  /** spec 6 oauth.token_exchange.subject_invalid: the precise reason, hash prefixes only. */
  private async subjectInvalid(agent: AgentClientRow, r: SubjectTokenRejected): Promise<OAuthError> {
    await this.audit(agent, 'oauth.token_exchange.subject_invalid', 'low', {
      subject_invalid_reason: r.reason,
      subject_token_jti_hash_prefix: r.jti ? hashPrefix(r.jti) : null,
    }, r.userId);
    return new OAuthError('invalid_grant', r.description);
  }

  /**
   * spec 3.2 denylist: `denied` at this second. A revoked agent (every token refused) answers like
   * a revoked client. A kill-tokens refuses tokens with iat up to its own second, so a token minted
   * in that second would be dead on arrival: wait for the next second (at most ~1 s), read the
   * denylist again (a revoke may have landed meanwhile) and let the exchange go on; its iat is then
   * after the kill. Still refused a second later (another kill in that second, or the clocks of
   * PostgreSQL and this process disagree), or refused again when the exchange runs again after
   * the wait (`wait` false): 503, never a token the bearer guard would refuse.
   */
  private async afterKillSecond(caller: Extract<ClientCaller, { kind: 'agent' }>, agent: AgentClientRow, wait: boolean): Promise<void> {
    if (await this.denylist.isDenied(agent.id, Number.MAX_SAFE_INTEGER)) throw invalidClient();
    if (wait) {
      await pastSecondOf();
      const iatFrom = Math.floor(Date.now() / 1000);
      if (!(await this.denylist.isDenied(agent.id, iatFrom))) return;
      if (await this.denylist.isDenied(agent.id, Number.MAX_SAFE_INTEGER)) throw invalidClient();
    }
    throw new OAuthError('temporarily_unavailable', 'Agent tokens were just revoked; retry shortly', 503, { 'Retry-After': '1' });
  }

  /**
   * spec 6 oauth.token_exchange.client_unauthorized: confidential gate, grant type allowlist,
   * clientType, tier (audit plus webhook, the payload is the metadata). A legacy OAuth client is
   * named as `oauth_client_id` (its `agent_client_id` null): it is no agent, and a webhook filtered
   * by an agent must not be matched by another client's id.
   */
  private async clientUnauthorized(caller: ClientCaller, reason: string, subjectJtiPrefix: string | null): Promise<void> {
    const client = caller.kind === 'agent' ? { agent_client_id: caller.clientId } : { agent_client_id: null, oauth_client_id: caller.clientId };
    const metadata = { ...client, reason, subject_token_jti_hash_prefix: subjectJtiPrefix };
    await this.events.auditAndOutbox(
      this.db,
      {
        tenantId: caller.tenantId,
        type: 'oauth.token_exchange.client_unauthorized',
        actorType: caller.kind === 'agent' ? 'agent' : 'system',
        actorId: caller.clientId,
        targetType: caller.kind === 'agent' ? 'agent_client' : 'oauth_client',
        targetId: caller.clientId,
        severity: 'medium',
        metadata,
      },
      { tenantId: caller.tenantId, topic: 'webhook', eventType: 'oauth.token_exchange.client_unauthorized', payload: metadata },
    );
  }

  /**
   * spec 6 oauth.token_exchange.rate_limited and agent.rate_limited (audit with the offending
   * limit scope and the computed limit; both also as webhooks). Written once per
   * window, on the first refused request (`first`), so a flood cannot flood the audit log.
   * `max_concurrent_tokens` answers the same 429 slow_down, Retry-After until its oldest live token expires.
   */
  private async rateLimited(
    agent: AgentClientRow,
    limitScope: 'agent_client' | 'subject_token_jti' | 'max_concurrent_tokens',
    limit: number,
    r: { first: boolean; retryAfterSeconds: number },
    form: FormParams,
    /** spec 6: of the verified subject token (per-jti limit) or of the presented one (presentedJtiPrefix) */
    subjectJtiPrefix: string | null,
  ): Promise<OAuthError> {
    if (r.first) {
      // as the exchange reads it (bounded, without repeats); a malformed one is not recorded
      let requested: string | null = null;
      try {
        requested = requestedScope(form.get('scope'))?.join(' ') ?? null;
      } catch {
        requested = null;
      }
      const metadata = {
        agent_client_id: agent.id,
        limit_scope: limitScope,
        rate_limit_key: RATE_LIMIT_KEYS[limitScope],
        computed_limit: limit,
        window_seconds: limitScope === 'max_concurrent_tokens' ? CONCURRENCY_EVENT_WINDOW_SECONDS : 60,
        retry_after_seconds: r.retryAfterSeconds,
        requested_scope: requested,
        subject_token_jti_hash_prefix: subjectJtiPrefix,
      };
      const base = { tenantId: agent.tenant_id, actorType: 'agent' as const, actorId: agent.id, targetType: 'agent_client', targetId: agent.id, severity: 'medium' as Severity, metadata };
      await this.db.tx(async (tx) => {
        // spec 6: payloads carry agent_client_id and subject_token_jti_hash_prefix, as every exchange event's
        const payload = {
          agent_client_id: agent.id,
          limit_scope: limitScope,
          computed_limit: limit,
          window_seconds: metadata.window_seconds,
          subject_token_jti_hash_prefix: subjectJtiPrefix,
        };
        await this.events.auditAndOutbox(tx, { ...base, type: 'oauth.token_exchange.rate_limited' }, {
          tenantId: agent.tenant_id,
          topic: 'webhook',
          eventType: 'oauth.token_exchange.rate_limited',
          payload,
        });
        await this.events.auditAndOutbox(tx, { ...base, type: 'agent.rate_limited' }, { tenantId: agent.tenant_id, topic: 'webhook', eventType: 'agent.rate_limited', payload });
      });
    }
    return slowDown(r.retryAfterSeconds, limitScope === 'max_concurrent_tokens' ? `live tokens of this agent (at most ${limit})` : 'token exchanges');
  }

  /**
   * A refused exchange (spec 6 subject_invalid, scope_denied): the audit event and its webhook in
   * one statement. The payload is the audit metadata (hash prefixes only, never a token).
   */
  private async audit(agent: AgentClientRow, type: string, severity: Severity, metadata: Record<string, unknown>, userId?: string): Promise<void> {
    const payload = { agent_client_id: agent.id, ...(userId ? { user_id: userId } : {}), ...metadata };
    await this.events.auditAndOutbox(
      this.db,
      {
        tenantId: agent.tenant_id,
        type,
        actorType: 'agent',
        actorId: agent.id,
        targetType: userId ? 'user' : 'agent_client',
        targetId: userId ?? agent.id,
        severity,
        metadata: { agent_client_id: agent.id, ...metadata },
      },
      { tenantId: agent.tenant_id, topic: 'webhook', eventType: type, payload },
    );
  }
}

/** The `rate_limit_key` of each limit scope in the rate_limited events. */
const RATE_LIMIT_KEYS = {
  agent_client: 'token_exchange_per_min',
  subject_token_jti: 'token_exchange_per_subject_jti_per_min',
  max_concurrent_tokens: 'max_concurrent_tokens',
} as const;

/** RFC 6749 section 5.2: the only grant this endpoint serves is token exchange. */
function assertTokenExchangeGrant(form: FormParams): void {
  const grantType = form.get('grant_type');
  if (!grantType) throw new OAuthError('invalid_request', 'grant_type is required');
  if (grantType !== TOKEN_EXCHANGE_GRANT) throw new OAuthError('unsupported_grant_type', 'Only the token-exchange grant is supported');
}

/**
 * spec 6 subject_token_jti_hash_prefix of a refusal decided before the subject token is verified:
 * the hash prefix of the presented token's jti, read without verification (only to be hashed),
 * or null when the request has no readable one.
 */
function presentedJtiPrefix(form: FormParams): string | null {
  let token: string | undefined;
  try {
    token = form.get('subject_token');
  } catch {
    return null; // repeated: no single token presented
  }
  if (!token || token.length > MAX_SUBJECT_TOKEN_LENGTH) return null;
  const jti = unverifiedJti(token);
  return jti ? hashPrefix(jti) : null;
}

/** At most as many distinct scope tokens as an agent's allowlist may hold: no more can be granted. */
const MAX_SCOPE_TOKENS = 100;

/**
 * The `scope` parameter's tokens without repeats (undefined when omitted); invalid_scope when
 * malformed or longer than any grant. The refusals' audit rows and webhooks carry it, so it is
 * bounded (100 tokens of 200 characters) rather than as long as the body allows.
 */
function requestedScope(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const scope = dedupe(splitScope(raw));
  if (!scope.length || scope.some((s) => !SCOPE_TOKEN.test(s) || s.length > 200)) throw new OAuthError('invalid_scope', 'The scope parameter is malformed');
  if (scope.length > MAX_SCOPE_TOKENS) throw new OAuthError('invalid_scope', `The scope parameter names more than ${MAX_SCOPE_TOKENS} scopes`);
  return scope;
}

function splitScope(s: string): string[] {
  return s.split(' ').filter(Boolean);
}

function dedupe(list: string[]): string[] {
  return [...new Set(list)];
}
