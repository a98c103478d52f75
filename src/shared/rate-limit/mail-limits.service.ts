import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { RateLimitedError } from '../errors/app-error';
import { RateLimitService } from './rate-limit.service';
import { RateLimitRule } from './rate-limit.decorator';
import { addressSubject } from './address-key';
import { ClientHasher } from '../crypto/client-hash';

/** Per client address limit of token and code checks (guessing is already hopeless; this bounds the work). */
export const VERIFY_PER_IP: RateLimitRule = {
  bucket: 'code-verify-ip',
  by: 'ip',
  limit: (c) => c.RATE_LIMIT_CODE_VERIFY_PER_IP_PER_MIN,
  windowSeconds: 60,
};

/**
 * Limits of every mail-sending endpoint: per client address (one counter for all flows) and per
 * recipient address (one counter per flow). Both are counted before the account is looked up,
 * for known and unknown addresses alike, so a 429 reveals nothing about the address (issue 5:
 * resend throttled per address and per IP). The client's limit comes first: a client it refuses
 * does not use up the recipient's quota (which would let one client address, blocked itself, keep
 * anyone's reset mails from them, and leave a counter per address it named).
 */
@Injectable()
export class MailLimits {
  constructor(
    private readonly limiter: RateLimitService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly hasher: ClientHasher,
  ) {}

  async enforce(flow: string, tenantId: string, address: string, ip: string): Promise<void> {
    const [client, recipient] = await this.limiter.hitInOrder([this.clientLimit(ip), this.addressLimit(flow, tenantId, address)]);
    if (!client.allowed) refused('mail-ip', Math.max(client.retryAfterSeconds, recipient.allowed ? 0 : recipient.retryAfterSeconds));
    if (!recipient.allowed) refused('mail-address', recipient.retryAfterSeconds);
  }

  /**
   * The two limits apart, for a flow with a check between them (a captcha): the client address is
   * counted first; the recipient's quota only once the request proved itself, so requests that
   * fail the check cannot use up someone else's address and keep its owner from getting mail.
   */
  async enforceClient(ip: string): Promise<void> {
    const r = await this.hitClient(ip);
    if (!r.allowed) refused('mail-ip', r.retryAfterSeconds);
  }

  async enforceAddress(flow: string, tenantId: string, address: string): Promise<void> {
    const r = await this.hitAddress(flow, tenantId, address);
    if (!r.allowed) refused('mail-address', r.retryAfterSeconds);
  }

  /**
   * Whether a notice (a mail telling the account's owner of a change they or someone with their
   * credentials made: password changed, second factor enabled, disabled, recovery codes renewed)
   * may go to `address`: at most RATE_LIMIT_EMAIL_PER_ADDRESS per kind of change per
   * RATE_LIMIT_EMAIL_WINDOW_SECONDS. Beyond, the change goes on and the notice is left out (the
   * owner has just been told of the same kind of change), so looping a change cannot flood a
   * mailbox, which may not even be the user's own when the address was never verified. A notice is
   * a safety net, so a limiter that cannot answer (Redis away) lets it go out.
   */
  async noticeAllowed(kind: string, tenantId: string | null, address: string): Promise<boolean> {
    try {
      return (await this.hitAddress(`notice-${kind}`, tenantId ?? 'dashboard', address.toLowerCase())).allowed;
    } catch {
      return true;
    }
  }

  private hitClient(ip: string) {
    const l = this.clientLimit(ip);
    return this.limiter.hit(l.bucket, l.key, l.limit, l.windowSeconds);
  }

  private hitAddress(flow: string, tenantId: string, address: string) {
    const l = this.addressLimit(flow, tenantId, address);
    return this.limiter.hit(l.bucket, l.key, l.limit, l.windowSeconds);
  }

  private clientLimit(ip: string) {
    return { bucket: 'mail-ip', key: `ip:${addressSubject(this.hasher, ip)}`, limit: this.config.RATE_LIMIT_EMAIL_PER_IP, windowSeconds: this.config.RATE_LIMIT_EMAIL_WINDOW_SECONDS };
  }

  private addressLimit(flow: string, tenantId: string, address: string) {
    return { bucket: `mail-${flow}`, key: `addr:${this.hasher.subject(`mail:${tenantId}:${address}`)}`, limit: this.config.RATE_LIMIT_EMAIL_PER_ADDRESS, windowSeconds: this.config.RATE_LIMIT_EMAIL_WINDOW_SECONDS };
  }
}

/** A mail limit's 429, its limiter `mail-ip` (the client address's) or `mail-address` (the recipient's, any flow). */
function refused(limiter: 'mail-ip' | 'mail-address', retryAfterSeconds: number): never {
  throw new RateLimitedError(limiter, retryAfterSeconds);
}
