/**
 * The agent tokens an agent client was issued in the last `maxTtl` seconds (every agent token
 * lives at most 900 s, spec 8), with their expiry: each has its `agent_actions` row (action
 * `token_exchange`, `jti`) and, written by the same statement (same `created_at`), its
 * `oauth.token_exchange.issued` audit row whose metadata has `expires_at` and `jti_hash_prefix`
 * (12 hex of the jti's SHA-256). Without the audit row the expiry is taken as created_at + maxTtl
 * (errs on the strict side). Columns: jti, created_at, expires_at. `agent` and `maxTtl` are SQL
 * parameter references (`$1`); `now` the clock to read (`now()` or `clock_timestamp()`).
 */
export function issuedAgentTokensSql(agent: string, maxTtl: string, now = 'now()'): string {
  return `SELECT x.jti, x.created_at, COALESCE((e.metadata->>'expires_at')::timestamptz, x.created_at + make_interval(secs => ${maxTtl})) AS expires_at
           FROM agent_actions x
           LEFT JOIN LATERAL (
             SELECT a.metadata FROM audit_events a
              WHERE a.tenant_id = x.tenant_id AND a.type = 'oauth.token_exchange.issued' AND a.created_at = x.created_at
                AND a.actor_id = x.agent_client_id::text
                AND a.metadata->>'jti_hash_prefix' = left(encode(sha256(convert_to(x.jti, 'UTF8')), 'hex'), 12)
              LIMIT 1) e ON true
          WHERE x.agent_client_id = ${agent} AND x.action = 'token_exchange' AND x.jti IS NOT NULL
            AND x.created_at > ${now} - make_interval(secs => ${maxTtl})`;
}
