import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { isFQDN } from 'class-validator';
import { parse } from 'tldts';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { idnaStable } from '../../../shared/http/email-address';
import { PasskeyDomainResponse, PutPasskeyDomainDto } from './security-settings.dto';

/**
 * Why a relying-party id cannot be used, or undefined when it can. WebAuthn wants a registrable
 * domain (or a name under one): browsers refuse an IP address and a public suffix (`com`,
 * `co.uk`, `github.io`: one site must not own passkeys for every site under it). `localhost` is
 * a secure context, so it is accepted outside production.
 */
export function rpIdProblem(rpId: string, production: boolean): string | undefined {
  if (rpId === 'localhost') return production ? 'passkey_rp_id localhost is refused in production' : undefined;
  const psl = parse(rpId, { allowPrivateDomains: true });
  if (psl.domain === null && (psl.isIcann || psl.isPrivate))
    return 'passkey_rp_id must not be a public suffix (such as com, co.uk or github.io): browsers refuse it as a relying party id';
  // an A-label (xn--) must be one IDNA decodes: browsers refuse to use an invalid one
  if (!isFQDN(rpId, { require_tld: true, allow_underscores: false, allow_trailing_dot: false, allow_numeric_tld: false }) || !idnaStable(rpId))
    return 'passkey_rp_id must be a domain name (dot-separated labels of 1-63 characters, no leading or trailing hyphen, not an IP address)';
  return undefined;
}

export class GetPasskeyDomainQuery extends Query<PasskeyDomainResponse> {
  constructor(readonly tenantId: string) {
    super();
  }
}

export class PutPasskeyDomainCommand extends Command<PasskeyDomainResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly body: PutPasskeyDomainDto,
  ) {
    super();
  }
}

/** The stored id and the one passkey ceremonies use: it, else the host of ACCOUNTS_URL. */
function toResponse(config: AppConfig, rpId: string | null): PasskeyDomainResponse {
  return { passkey_rp_id: rpId, effective_rp_id: rpId ?? new URL(config.ACCOUNTS_URL).hostname };
}

@QueryHandler(GetPasskeyDomainQuery)
export class GetPasskeyDomainHandler implements IQueryHandler<GetPasskeyDomainQuery, PasskeyDomainResponse> {
  constructor(
    private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async execute(q: GetPasskeyDomainQuery): Promise<PasskeyDomainResponse> {
    const [row] = await this.db.query<{ passkey_rp_id: string | null }>(`SELECT passkey_rp_id FROM tenants WHERE id = $1`, [q.tenantId]);
    return toResponse(this.config, row.passkey_rp_id);
  }
}

/**
 * spec UpdateTenantPasskeyDomainRequest (owner only): sets or clears (null) the tenant's WebAuthn
 * relying-party id. One audit event when the value changes, with the old and new ids.
 */
@CommandHandler(PutPasskeyDomainCommand)
export class PutPasskeyDomainHandler implements ICommandHandler<PutPasskeyDomainCommand, PasskeyDomainResponse> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async execute(cmd: PutPasskeyDomainCommand): Promise<PasskeyDomainResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const next = cmd.body.passkey_rp_id;
    const problem = next === null ? undefined : rpIdProblem(next, this.config.isProduction);
    if (problem) throw new AppError('request/invalid', 'One or more fields are invalid', { errors: [{ field: 'passkey_rp_id', message: problem }] });
    return this.db.tx(async (tx) => {
      const [cur] = await tx.query<{ passkey_rp_id: string | null }>(`SELECT passkey_rp_id FROM tenants WHERE id = $1 FOR UPDATE`, [tenantId]);
      if (cur.passkey_rp_id !== next) {
        await tx.query(`UPDATE tenants SET passkey_rp_id = $2, updated_at = now() WHERE id = $1`, [tenantId, next]);
        await this.events.audit(tx, {
          tenantId,
          type: 'tenant.passkey_domain_updated',
          actorType: 'dashboard_user',
          actorId: cmd.actor.userId,
          targetType: 'tenant',
          targetId: tenantId,
          metadata: { from: cur.passkey_rp_id, to: next },
        });
      }
      return toResponse(this.config, next);
    });
  }
}

export const PasskeyDomainHandlers = [GetPasskeyDomainHandler, PutPasskeyDomainHandler];
