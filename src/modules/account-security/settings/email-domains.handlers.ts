import { domainToASCII } from 'url';
import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { Db } from '../../../shared/db/db.service';
import { AppError, FieldError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { caseStable, idnaStable } from '../../../shared/http/email-address';
import { canonicalDomain } from '../../users/email';
import { EmailDomainsResponse, PutEmailDomainsDto } from './security-settings.dto';

export class GetEmailDomainsQuery extends Query<EmailDomainsResponse> {
  constructor(readonly tenantId: string) {
    super();
  }
}

@QueryHandler(GetEmailDomainsQuery)
export class GetEmailDomainsHandler implements IQueryHandler<GetEmailDomainsQuery, EmailDomainsResponse> {
  constructor(private readonly db: Db) {}
  async execute(q: GetEmailDomainsQuery): Promise<EmailDomainsResponse> {
    const [row] = await this.db.query<{ email_allowlist: string[]; email_blocklist: string[] }>(`SELECT email_allowlist, email_blocklist FROM tenants WHERE id = $1`, [q.tenantId]);
    return { allowlist: row.email_allowlist, blocklist: row.email_blocklist };
  }
}

export class PutEmailDomainsCommand extends Command<EmailDomainsResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly body: PutEmailDomainsDto,
  ) {
    super();
  }
}

/**
 * A list entry as stored: trimmed, without a leading `@` or `*.` and a trailing dot (a domain
 * covers its subdomains anyway), in the form addresses' domains are compared in (canonicalDomain:
 * IDNA's, whose case mapping is DNS's; not the local part's fold, which makes the final sigma of
 * `βας.gr` a σ, another domain). Undefined for something that cannot be a domain.
 */
export function normalizeDomain(entry: string): string | undefined {
  const d = entry.trim().normalize('NFKC').trim().replace(/^@/, '').replace(/^\*\./, '').replace(/\.+$/, '');
  if (!d || /[\s@/:]/.test(d)) return undefined;
  // a host name as DNS has it: no empty label, each label at most 63 octets, 253 in all (an
  // internationalized name counted in its ASCII form, which domainToASCII also checks)
  // Each label is a host name's (letters, digits and inner hyphens: RFC 1123; an internationalized
  // one in its A-label) and the last is not all digits: an entry like `a_b.com`, `*.com` or
  // `1.2.3.4` can match no address (isEmail takes no bare IP domain) and would be a silent no-op
  const ascii = domainToASCII(d);
  const labels = ascii.split('.');
  // and, as an address's domain must be (isEmailAddress), stable under IDNA and in any case
  if (!idnaStable(d.toLowerCase()) || !caseStable(d) || ascii.length > 253 || labels.some((label) => !HOST_LABEL.test(label)) || /^\d+$/.test(labels[labels.length - 1])) return undefined;
  // stored as addresses' domains are compared: the IDNA Unicode form (an A-label is the same name)
  return canonicalDomain(d);
}

const HOST_LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** The list's domains, normalized and without repeats, each with the position of its first entry in the request. */
function normalizeList(field: string, list: string[] | undefined, errors: FieldError[]): Map<string, number> {
  const out = new Map<string, number>();
  (list ?? []).forEach((entry, i) => {
    const d = normalizeDomain(entry);
    if (!d) errors.push({ field: `${field}.${i}`, message: `${field} entries must be domain names` });
    else if (!out.has(d)) out.set(d, i);
  });
  return out;
}

/** spec PutEmailDomainsRequest (owner only): replaces both lists (a missing list is empty); audited. */
@CommandHandler(PutEmailDomainsCommand)
export class PutEmailDomainsHandler implements ICommandHandler<PutEmailDomainsCommand, EmailDomainsResponse> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: PutEmailDomainsCommand): Promise<EmailDomainsResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const errors: FieldError[] = [];
    const allowed = normalizeList('allowlist', cmd.body.allowlist, errors);
    const blocked = normalizeList('blocklist', cmd.body.blocklist, errors);
    // a domain in both lists would be allowed and blocked at once: which was meant is the owner's
    // call (named at the request's position of its first blocklist entry)
    for (const [d, i] of blocked) if (allowed.has(d)) errors.push({ field: `blocklist.${i}`, message: `${d} is in the allowlist too` });
    const [allowlist, blocklist] = [[...allowed.keys()], [...blocked.keys()]];
    if (errors.length) throw new AppError('request/invalid', 'One or more fields are invalid', { errors });
    return this.db.tx(async (tx) => {
      const [cur] = await tx.query<{ email_allowlist: string[]; email_blocklist: string[] }>(
        `SELECT email_allowlist, email_blocklist FROM tenants WHERE id = $1 FOR UPDATE`,
        [tenantId],
      );
      // the same lists again change nothing: no update, no audit event
      if (sameList(cur.email_allowlist, allowlist) && sameList(cur.email_blocklist, blocklist)) return { allowlist, blocklist };
      await tx.query(`UPDATE tenants SET email_allowlist = $2, email_blocklist = $3, updated_at = now() WHERE id = $1`, [tenantId, allowlist, blocklist]);
      // weakening (a higher severity, as the security settings'): the allowlist dropped or widened
      // (an empty one allows every domain), or a blocked domain let in
      const widened = cur.email_allowlist.length > 0 && (allowlist.length === 0 || allowlist.some((d) => !cur.email_allowlist.includes(d)));
      const unblocked = cur.email_blocklist.some((d) => !blocklist.includes(d));
      await this.events.audit(tx, {
        tenantId,
        type: 'tenant.email_domains_updated',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'tenant',
        targetId: tenantId,
        severity: widened || unblocked ? 'medium' : 'info',
        metadata: { before: { allowlist: cur.email_allowlist, blocklist: cur.email_blocklist }, after: { allowlist, blocklist } },
      });
      return { allowlist, blocklist };
    });
  }
}

const sameList = (a: string[], b: string[]) => a.length === b.length && a.every((d, i) => d === b[i]);

export const EmailDomainsHandlers = [GetEmailDomainsHandler, PutEmailDomainsHandler];
