import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { AccessClaims } from '../../../shared/crypto/jwt.service';
import { hashPrefix, safeEqual, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { OAuthError } from '../../../shared/errors/oauth-error';
import { EventsService } from '../../../shared/events/events.service';
import { AgentsService } from '../../agents/agents.service';
import { SessionsService } from '../../sessions/sessions.service';
import { AccessTokenReader } from '../access-token-reader';
import { ClientAuthenticator, OAuthCaller } from '../client-auth/client-authenticator.service';
import { JtiRevocationSource } from '../jti-revocation.source';
import { failClosed } from '../oauth-errors';
import { RevokeTokenCommand } from './revoke-token.command';

const REFRESH_SHAPE = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}):([A-Za-z0-9_-]{43})$/;

/** RFC 7009 section 2.1: "the token was not issued to the client making the revocation request". */
const notYours = () => new OAuthError('unauthorized_client', 'The client may not revoke this token');

/**
 * RFC 7009 token revocation. Access tokens (JWT) are refused by jti until they expire (the bearer
 * guard and introspection check `revoked:jti:<jti>`); a refresh token `<id>:<secret>` ends its
 * session. Agent tokens may be revoked by their agent or the tenant's API key, user tokens and
 * refresh tokens by the tenant's API key. Unknown, invalid, expired or other-tenant tokens: 200.
 */
@CommandHandler(RevokeTokenCommand)
export class RevokeTokenHandler implements ICommandHandler<RevokeTokenCommand, void> {
  constructor(
    private readonly db: Db,
    private readonly clients: ClientAuthenticator,
    private readonly tokens: AccessTokenReader,
    private readonly sessions: SessionsService,
    private readonly events: EventsService,
    private readonly agents: AgentsService,
    private readonly revocation: TokenRevocationService,
    private readonly jti: JtiRevocationSource,
  ) {}

  async execute(cmd: RevokeTokenCommand): Promise<void> {
    try {
      await this.revoke(cmd);
    } catch (e) {
      failClosed(e);
    }
  }

  private async revoke({ form, authorization, apiKey, client }: RevokeTokenCommand): Promise<void> {
    // RFC 7009 section 2.1: client authentication, then token (required) and token_type_hint (a hint only)
    const caller = await this.clients.authenticateResourceServer(form, authorization, apiKey);
    const token = form.get('token');
    if (!token) throw new OAuthError('invalid_request', 'token is required');
    form.get('token_type_hint');

    const refresh = REFRESH_SHAPE.exec(token);
    if (refresh) return this.revokeRefreshToken(caller, refresh[1], refresh[2]);
    // an MFA enrollment-only token too: it can enroll a factor on the account while it lives
    const claims = await this.tokens.read(token, caller.tenantId, { enrollmentTokens: true });
    // RFC 7009 section 2.2: an invalid token is not an error
    if (!claims) return;
    const agentId = claims.act?.sub;
    if (caller.kind !== 'api_key' && (!agentId || caller.clientId !== agentId)) throw notYours();
    if (claims.exp - Math.floor(Date.now() / 1000) <= 0) return;
    await this.db.tx(async (tx) => {
      // RFC 7009: revoking again succeeds and changes nothing; the revocation is recorded once
      if (!(await this.jti.revoke(tx, caller.tenantId, claims))) return;
      await this.events.audit(tx, {
        tenantId: caller.tenantId,
        type: 'oauth.token_revoked',
        actorType: caller.kind === 'api_key' ? 'api_key' : 'agent',
        actorId: caller.kind === 'api_key' ? caller.apiKeyId : caller.clientId,
        targetType: 'user',
        targetId: claims.sub,
        metadata: this.metadata(claims, agentId),
      });
      // the agent's own action only: a revocation by the tenant (its API key) is the tenant's,
      // audited above, and must not show in the user's agents list as the agent acting
      if (agentId && caller.kind === 'agent') {
        await this.agents.recordAction(tx, {
          tenantId: caller.tenantId,
          agentClientId: agentId,
          action: 'token_revoked',
          actorUserId: claims.sub,
          methodOrEvent: 'POST /oauth/revoke',
          jti: claims.jti,
          scopeUsed: claims.scope,
          ip: client.ip,
          userAgent: client.userAgent || null,
        });
      }
    });
    // committed: cached before answering, so every API process refuses it from now on (when
    // Redis cannot be written the caller gets 503 and retries; the row is already there)
    try {
      await this.jti.cacheRevoked(claims);
    } catch {
      throw new AppError('server/unavailable', 'Revocation state unavailable');
    }
  }

  /**
   * A refresh token of the tenant with the right secret ends its session (RFC 7009 section 2.1).
   * Not one a guest's claim retired (revoked, never rotated): it is no token of the session any
   * more, as refresh treats it, so presenting it (a tab that signs out with the guest token it
   * held) has no effect and the claimed session goes on.
   */
  private async revokeRefreshToken(caller: OAuthCaller, id: string, secret: string): Promise<void> {
    const [row] = await this.db.query<{ session_id: string; secret_hash: string; user_id: string }>(
      `SELECT session_id, secret_hash, user_id FROM refresh_tokens
        WHERE id = $1 AND tenant_id = $2 AND NOT (revoked_at IS NOT NULL AND rotated_at IS NULL)`,
      [id, caller.tenantId],
    );
    if (!row || !safeEqual(row.secret_hash, sha256Hex(secret))) return;
    // refresh tokens are issued to the tenant's application (its X-API-Key), not to OAuth clients
    if (caller.kind !== 'api_key') throw notYours();
    await this.db.tx(async (tx) => {
      const ended = await this.sessions.revokeSession(row.session_id, 'oauth_revoke', tx);
      if (ended) {
        await this.events.audit(tx, {
          tenantId: caller.tenantId,
          type: 'oauth.token_revoked',
          actorType: 'api_key',
          actorId: caller.apiKeyId,
          targetType: 'session',
          targetId: row.session_id,
          metadata: { token_type: 'refresh_token', user_id: row.user_id },
        });
      }
    });
    await this.revocation.markSessionsRevoked([row.session_id]);
  }

  private metadata(claims: AccessClaims, agentId: string | undefined): Record<string, unknown> {
    return {
      token_type: 'access_token',
      jti_hash_prefix: hashPrefix(claims.jti),
      expires_at: new Date(claims.exp * 1000).toISOString(),
      ...(agentId ? { agent_client_id: agentId } : {}),
    };
  }
}
