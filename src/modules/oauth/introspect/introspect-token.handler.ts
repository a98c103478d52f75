import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { Db } from '../../../shared/db/db.service';
import { UUID } from '../../../shared/uuid';
import { OAuthError } from '../../../shared/errors/oauth-error';
import { AgentDenylistService } from '../../agents/agent-denylist.service';
import { AccessTokenReader } from '../access-token-reader';
import { ClientAuthenticator } from '../client-auth/client-authenticator.service';
import { failClosed } from '../oauth-errors';
import { IntrospectionResponse, IntrospectTokenQuery } from './introspect-token.query';

const INACTIVE: IntrospectionResponse = Object.freeze({ active: false });

/**
 * RFC 7662 introspection. Inactive: not ours, expired, another tenant's, a revoked session or
 * jti, a denylisted agent (spec 5 rule 1) or an (agent, user) pair the user revoked (contract).
 * Fails closed (503) when the revocation state cannot be read.
 */
@QueryHandler(IntrospectTokenQuery)
export class IntrospectTokenHandler implements IQueryHandler<IntrospectTokenQuery, IntrospectionResponse> {
  constructor(
    private readonly db: Db,
    private readonly clients: ClientAuthenticator,
    private readonly tokens: AccessTokenReader,
    private readonly revocation: TokenRevocationService,
    private readonly denylist: AgentDenylistService,
  ) {}

  async execute(q: IntrospectTokenQuery): Promise<IntrospectionResponse> {
    try {
      return await this.introspect(q);
    } catch (e) {
      return failClosed(e);
    }
  }

  private async introspect({ form, authorization, apiKey }: IntrospectTokenQuery): Promise<IntrospectionResponse> {
    // RFC 7662 section 2.1: the protected resource authenticates (contract: confidential client or X-API-Key)
    const caller = await this.clients.authenticateResourceServer(form, authorization, apiKey);
    // RFC 7662 section 2.1: token (required), token_type_hint (optional, single)
    const token = form.get('token');
    if (!token) throw new OAuthError('invalid_request', 'token is required');
    form.get('token_type_hint');

    const claims = await this.tokens.read(token, caller.tenantId);
    if (!claims) return INACTIVE;
    const agentId = claims.act?.sub;
    const [reason, denied, pairRevoked, live] = await Promise.all([
      // ended session (Redis), revoked jti, agent denylist (PostgreSQL on a cache miss)
      this.revocation.revokedReason(claims),
      agentId ? this.denylist.isDenied(agentId, claims.iat) : false,
      agentId ? this.denylist.isUserRevoked(caller.tenantId, claims.sub, agentId, claims.iat) : false,
      // PostgreSQL is the source of truth of ended sessions (a Redis flush must not revive them)
      // an agent token ends with its subject token's session (subject_sid); one signed before it
      // carried that: its user must still exist (an erased user's agent tokens end at once here,
      // as their sessions' tokens do)
      agentId
        ? typeof claims.subject_sid === 'string'
          ? this.sessionLive(caller.tenantId, claims.subject_sid, claims.sub)
          : this.userExists(caller.tenantId, claims.sub)
        : typeof claims.sid === 'string'
          ? this.sessionLive(caller.tenantId, claims.sid, claims.sub)
          : true,
    ]);
    if (reason || denied || pairRevoked || !live) return INACTIVE;

    // RFC 7662 section 2.2
    return {
      active: true,
      scope: claims.scope,
      // the token's client (RFC 9068 section 2.2): its agent, or else its tenant (tokens signed
      // before client_id was a claim: an agent's has act.sub)
      ...(claims.client_id || agentId ? { client_id: claims.client_id ?? agentId } : {}),
      token_type: 'Bearer',
      exp: claims.exp,
      iat: claims.iat,
      sub: claims.sub,
      aud: claims.aud,
      iss: claims.iss,
      jti: claims.jti,
      tenant_id: claims.tenant_id,
      ...(agentId ? { act: { sub: agentId } } : {}),
      amr: claims.amr,
      aal: claims.aal,
      role: claims.role,
      is_anonymous: claims.is_anonymous,
    };
  }

  private async sessionLive(tenantId: string, sid: string, userId: string): Promise<boolean> {
    if (!UUID.test(sid)) return false;
    const rows = await this.db.query(
      `SELECT 1 FROM user_sessions WHERE id = $1 AND tenant_id = $2 AND user_id = $3 AND revoked_at IS NULL`,
      [sid, tenantId, userId],
      'oauth_introspect_session',
    );
    return rows.length > 0;
  }

  private async userExists(tenantId: string, userId: string): Promise<boolean> {
    const rows = await this.db.query(`SELECT 1 FROM users WHERE id = $1 AND tenant_id = $2`, [userId, tenantId], 'oauth_introspect_user');
    return rows.length > 0;
  }
}
