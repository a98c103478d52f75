import { Injectable } from '@nestjs/common';
import { ApiKeyResolver } from '../../../shared/auth/api-key.strategy';
import { safeEqual, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { OAuthError } from '../../../shared/errors/oauth-error';
import { AgentClientRow, AgentsService } from '../../agents/agents.service';
import { FormParams } from '../oauth-form';
import { UUID } from '../../../shared/uuid';

export type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'none';

/** Client credentials as presented (RFC 6749 section 2.3.1). */
export interface PresentedCredentials {
  clientId: string;
  clientSecret?: string;
  method: ClientAuthMethod;
}

/** The caller of an /oauth/* endpoint once authenticated. */
export type OAuthCaller =
  | { kind: 'agent'; tenantId: string; clientId: string; method: ClientAuthMethod; agent: AgentClientRow }
  /** a client of the legacy oauth_clients table (confidential, or public: no secret) */
  | { kind: 'oauth_client'; tenantId: string; clientId: string; method: ClientAuthMethod; confidential: boolean }
  /** the tenant's server SDK (X-API-Key), accepted by introspection and revocation */
  | { kind: 'api_key'; tenantId: string; clientId?: undefined; apiKeyId: string };

/** A caller authenticated by client credentials. */
export type ClientCaller = Exclude<OAuthCaller, { kind: 'api_key' }>;

const BASIC = /^Basic\s+([A-Za-z0-9+/=._~-]*)\s*$/i;
const DUMMY_HASH = sha256Hex('authp:no-such-client');

/** RFC 6749 section 2.3.1: client_id and secret are form-urlencoded before they are base64-encoded. */
function formDecode(s: string): string {
  return decodeURIComponent(s.replace(/\+/g, ' '));
}

/**
 * 401 invalid_client with the Basic challenge, whatever the method the client used: RFC 6749
 * section 5.2 requires it after a failed HTTP Basic attempt and allows a 401 otherwise, and every
 * 401 carries a challenge (RFC 9110 section 15.5.2).
 */
export function invalidClient(description = 'Client authentication failed'): OAuthError {
  return new OAuthError('invalid_client', description, 401, { 'WWW-Authenticate': 'Basic realm="oauth", charset="UTF-8"' });
}

/**
 * Client authentication of the OAuth endpoints: HTTP Basic (client_secret_basic) or client_id and
 * client_secret in the body (client_secret_post), never both; secrets compared as SHA-256 in
 * constant time. Agent clients (agent_clients) first, then legacy OAuth clients (oauth_clients).
 */
@Injectable()
export class ClientAuthenticator {
  constructor(
    private readonly db: Db,
    private readonly agents: AgentsService,
    private readonly apiKeys: ApiKeyResolver,
  ) {}

  /** The credentials of the request, or null when it carries none. */
  presented(form: FormParams, authorization: string | undefined): PresentedCredentials | null {
    const bodyId = form.get('client_id');
    const bodySecret = form.get('client_secret');
    if (authorization !== undefined) {
      const m = BASIC.exec(authorization);
      if (!m) throw invalidClient('Only HTTP Basic client authentication is supported in the Authorization header');
      const decoded = Buffer.from(m[1], 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) throw invalidClient();
      let clientId: string;
      let clientSecret: string;
      try {
        clientId = formDecode(decoded.slice(0, colon));
        clientSecret = formDecode(decoded.slice(colon + 1));
      } catch {
        throw invalidClient();
      }
      // RFC 6749 section 2.3: a client MUST NOT use more than one authentication method per request
      if (bodySecret !== undefined) throw new OAuthError('invalid_request', 'Use either HTTP Basic or client_secret in the body, not both');
      if (bodyId !== undefined && bodyId !== clientId) throw new OAuthError('invalid_request', 'client_id in the body differs from the HTTP Basic client');
      return { clientId, clientSecret, method: 'client_secret_basic' };
    }
    if (bodyId === undefined) {
      if (bodySecret !== undefined) throw new OAuthError('invalid_request', 'client_secret without client_id');
      return null;
    }
    return bodySecret === undefined ? { clientId: bodyId, method: 'none' } : { clientId: bodyId, clientSecret: bodySecret, method: 'client_secret_post' };
  }

  /**
   * Authenticates the client of the request (RFC 6749 section 3.2.1). Unknown client, wrong
   * secret, revoked client or no credentials: 401 invalid_client. A public legacy client that
   * sent only its client_id comes back with `confidential: false` (the caller decides).
   */
  async authenticate(form: FormParams, authorization: string | undefined): Promise<ClientCaller> {
    const creds = this.presented(form, authorization);
    if (!creds) throw invalidClient('Client authentication required');
    const fail = () => invalidClient();
    if (!UUID.test(creds.clientId) || (creds.clientSecret?.length ?? 0) > 512) {
      safeEqual(DUMMY_HASH, sha256Hex(creds.clientSecret ?? ''));
      throw fail();
    }
    const agent = await this.agents.findClient(creds.clientId.toLowerCase());
    if (agent) {
      // spec 5 rule 2: agent clients are confidential; the secret is required
      const ok = creds.clientSecret !== undefined && safeEqual(agent.secret_hash, sha256Hex(creds.clientSecret));
      if (!ok || agent.revoked_at) throw fail();
      return { kind: 'agent', tenantId: agent.tenant_id, clientId: agent.id, method: creds.method, agent };
    }
    const [client] = await this.db.query<{ id: string; tenant_id: string; client_type: 'public' | 'confidential'; secret_hash: string | null }>(
      `SELECT id, tenant_id, client_type, secret_hash FROM oauth_clients WHERE id = $1 AND revoked_at IS NULL`,
      [creds.clientId],
      'oauth_client_auth',
    );
    if (!client) {
      safeEqual(DUMMY_HASH, sha256Hex(creds.clientSecret ?? ''));
      throw fail();
    }
    if (client.client_type === 'public') {
      if (creds.clientSecret !== undefined) throw fail();
      return { kind: 'oauth_client', tenantId: client.tenant_id, clientId: client.id, method: 'none', confidential: false };
    }
    if (creds.clientSecret === undefined || !client.secret_hash || !safeEqual(client.secret_hash, sha256Hex(creds.clientSecret))) throw fail();
    return { kind: 'oauth_client', tenantId: client.tenant_id, clientId: client.id, method: creds.method, confidential: true };
  }

  /**
   * Callers of introspection and revocation (contract "Agents and OAuth"): a confidential client
   * of the tenant (agent or legacy), or the tenant's X-API-Key. Exactly one of the two.
   */
  async authenticateResourceServer(form: FormParams, authorization: string | undefined, apiKey: string | undefined): Promise<OAuthCaller> {
    // a bare body client_id (no secret, no Authorization) proves nothing, and standard clients
    // (oauth4webapi, openid-client) always send one: beside X-API-Key it is ignored, the key being
    // the credential; a secret or Basic credentials beside the key are still refused
    const hasClientCreds = authorization !== undefined || form.has('client_secret') || (apiKey === undefined && form.has('client_id'));
    if (apiKey !== undefined && hasClientCreds) throw new OAuthError('invalid_request', 'Use either client credentials or X-API-Key, not both');
    if (apiKey !== undefined) {
      try {
        const key = await this.apiKeys.resolve(apiKey);
        return { kind: 'api_key', tenantId: key.tenantId, apiKeyId: key.id };
      } catch (e) {
        if (e instanceof AppError && e.code === 'auth/invalid_api_key') throw invalidClient('The API key is invalid or revoked');
        throw e;
      }
    }
    const caller = await this.authenticate(form, authorization);
    if (caller.kind === 'oauth_client' && !caller.confidential) throw invalidClient('A confidential client is required');
    return caller;
  }
}
