import { randomBytes } from 'crypto';
import { randomToken, sha256Hex } from '../../src/shared/crypto/tokens';
import { Db } from '../../src/shared/db/db.service';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

export interface AgentFixture {
  /** the agent id, also its OAuth client_id */
  id: string;
  secret: string;
  tenantId: string;
}

export interface AgentOverrides {
  name: string;
  scopes: string[];
  grant_types: string[];
  agent_token_max_ttl_sec: number;
  rate_limits: Record<string, number>;
  disabled: boolean;
  revoked: boolean;
}

/**
 * An agent client persisted straight into agent_clients (secret stored as SHA-256), for tests of
 * the token endpoint; the agents API itself is tested through HTTP in agents/.
 */
export async function createAgent(db: Db, tenantId: string, o: Partial<AgentOverrides> = {}): Promise<AgentFixture> {
  const secret = randomToken();
  const [row] = await db.query<{ id: string }>(
    `INSERT INTO agent_clients (tenant_id, name, scopes, grant_types, agent_token_max_ttl_sec, rate_limits, secret_hash, disabled_at, revoked_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $8 THEN now() END, CASE WHEN $9 THEN now() END) RETURNING id`,
    [
      tenantId,
      o.name ?? `agent-${randomBytes(3).toString('hex')}`,
      o.scopes ?? ['openid', 'profile', 'email'],
      o.grant_types ?? [TOKEN_EXCHANGE],
      o.agent_token_max_ttl_sec ?? 900,
      JSON.stringify(o.rate_limits ?? {}),
      sha256Hex(secret),
      o.disabled ?? false,
      o.revoked ?? false,
    ],
  );
  return { id: row.id, secret, tenantId };
}

/** A legacy OAuth client (oauth_clients), confidential unless `public` is set. */
export async function createOAuthClient(db: Db, tenantId: string, type: 'confidential' | 'public' = 'confidential'): Promise<{ id: string; secret: string }> {
  const secret = randomToken();
  const [row] = await db.query<{ id: string }>(
    `INSERT INTO oauth_clients (tenant_id, name, client_type, grant_types, secret_hash) VALUES ($1, 'legacy', $2, '{}', $3) RETURNING id`,
    [tenantId, type, type === 'confidential' ? sha256Hex(secret) : null],
  );
  return { id: row.id, secret };
}
