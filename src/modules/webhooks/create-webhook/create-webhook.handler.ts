import { randomUUID } from 'crypto';
import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { EnvelopeCipher } from '../../../shared/crypto/envelope-cipher';
import { Db } from '../../../shared/db/db.service';
import { assertTenantCap } from '../../../shared/db/tenant-cap';
import { AppError, FieldError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { generateWebhookSecret } from '../signature';
import { defaultLookupAll, redactedUrl, LookupAll, REGISTRATION_DNS_TIMEOUT_MS, urlPolicyFor, validateWebhookUrl, WebhookDnsError, WebhookUrlError } from '../url-policy';
import { CreatedWebhookEndpointResponse, ENDPOINT_COLUMNS, toEndpointResponse, WebhookEndpointRow } from '../webhook-endpoint.entity';
import { ALL_EVENTS, MAX_ENDPOINTS_PER_TENANT } from '../webhook-events';
import { secretAad } from '../webhook-secret';
import { CreateWebhookCommand } from './create-webhook.command';
import { LookupGate } from './lookup-gate';

/**
 * DNS lookups one tenant may run at once at registration (per API process): a tenant registering
 * host names whose DNS never answers holds at most this many resolvers, each for at most
 * REGISTRATION_DNS_TIMEOUT_MS; its further registrations wait for a turn within that same time.
 */
export const REGISTRATION_LOOKUPS_PER_TENANT = 2;

/** The 503 detail when the URL's host could not be looked up because DNS failed (not "no such name"). */
export const DNS_UNAVAILABLE = "The url's host could not be checked now (DNS lookup failed); try again later";

const timedOut = () => new WebhookDnsError('timeout', REGISTRATION_DNS_TIMEOUT_MS);

@CommandHandler(CreateWebhookCommand)
export class CreateWebhookHandler implements ICommandHandler<CreateWebhookCommand> {
  private readonly lookups = new LookupGate(REGISTRATION_LOOKUPS_PER_TENANT);

  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly cipher: EnvelopeCipher,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async execute(cmd: CreateWebhookCommand): Promise<CreatedWebhookEndpointResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const { events, agent_client_id: agentClientId = null } = cmd.body;
    const errors: FieldError[] = [];
    if (events.includes(ALL_EVENTS) && events.length > 1) errors.push({ field: 'events', message: `"${ALL_EVENTS}" must be the only entry of events` });
    let url: URL | undefined;
    try {
      // waiting for a turn counts against the lookup's time limit
      const deadline = Date.now() + REGISTRATION_DNS_TIMEOUT_MS;
      const gated: LookupAll = (host, ctx) =>
        this.lookups.run(
          tenantId,
          Math.max(1, deadline - Date.now()),
          (timeoutMs) => defaultLookupAll(host, { ...ctx, timeoutMs }).catch((e: unknown) => Promise.reject(e instanceof WebhookDnsError && e.reason === 'timeout' ? timedOut() : e)),
          () => {
            throw timedOut();
          },
        );
      url = await validateWebhookUrl(cmd.body.url, urlPolicyFor(this.config), gated, { timeoutMs: REGISTRATION_DNS_TIMEOUT_MS });
    } catch (err) {
      // our resolver failed (SERVFAIL, REFUSED, unreachable): the URL is not known to be bad, it
      // could not be checked now. A timeout stays a 400 (see webhooks/README.md: mostly the
      // tenant's own DNS hanging, and what the per-tenant lookup limit answers too)
      if (err instanceof WebhookDnsError && err.reason === 'failed') throw new AppError('server/unavailable', DNS_UNAVAILABLE);
      if (!(err instanceof WebhookUrlError)) throw err;
      errors.push({ field: 'url', message: `url ${err.message}` });
    }
    if (errors.length || !url) throw new AppError('request/invalid', 'One or more fields are invalid', { errors });

    const id = randomUUID();
    const secret = generateWebhookSecret();
    const row = await this.db.tx(async (tx) => {
      if (agentClientId) {
        const [agent] = await tx.query(`SELECT 1 FROM agent_clients WHERE id = $1 AND tenant_id = $2`, [agentClientId, tenantId]);
        if (!agent) {
          throw new AppError('request/invalid', 'One or more fields are invalid', {
            errors: [{ field: 'agent_client_id', message: 'agent_client_id is not an agent client of this tenant' }],
          });
        }
      }
      await assertTenantCap(tx, {
        kind: 'webhook_endpoints',
        tenantId,
        countSql: `SELECT count(*)::int AS n FROM webhook_endpoints WHERE tenant_id = $1`,
        max: MAX_ENDPOINTS_PER_TENANT,
        code: 'webhook/limit_reached',
        what: 'webhook endpoints',
      });
      const [created] = await tx.query<WebhookEndpointRow>(
        `INSERT INTO webhook_endpoints (id, tenant_id, url, events, agent_client_id, secret_enc, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${ENDPOINT_COLUMNS}`,
        [id, tenantId, url!.href, events, agentClientId, this.cipher.encrypt(secret, secretAad(id)), cmd.actor.userId],
      );
      await this.events.audit(tx, {
        tenantId,
        type: 'webhook.created',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'webhook_endpoint',
        targetId: id,
        metadata: { url: redactedUrl(url!.href), events, agent_client_id: agentClientId },
      });
      return created;
    });
    return { ...toEndpointResponse(row), secret };
  }
}
