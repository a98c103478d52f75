import { setTimeout as sleep } from 'timers/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { sha256Hex } from '../../shared/crypto/tokens';
import { AppError } from '../../shared/errors/app-error';
import { REDIS } from '../../shared/redis/redis.module';

/** How long identical requests wait for the one verifying their token (siteverify's 5 s timeout, and margin). */
const SHARED_PENDING_MS = 10_000;
/** How long a verdict is shared: a Turnstile token is valid for 300 s. */
const SHARED_VERDICT_MS = 300_000;

/** Verifies a bot-challenge token against the siteverify URL (Cloudflare Turnstile protocol). */
@Injectable()
export class TurnstileService {
  private readonly logger = new Logger(TurnstileService.name);
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  get enabled(): boolean {
    return Boolean(this.config.TURNSTILE_SECRET);
  }

  /**
   * `hostnames`: where the widget must have been solved (siteverify's `hostname`); none = any.
   * Tenant sign-up passes TURNSTILE_HOSTNAMES (the platform's pages); a tenant's email-code captcha
   * is solved on the tenant's own site, so it passes none.
   */
  async verify(token: string | undefined, ip: string, hostnames: readonly string[] = [], opts: { sharedBy?: string } = {}): Promise<void> {
    if (!this.enabled) return;
    if (!token) throw new AppError('onboarding/bot_check_failed', 'turnstile_token is required');
    if (opts.sharedBy) return this.verifyShared(token, ip, hostnames, sha256Hex(opts.sharedBy));
    return this.siteverify(token, ip, hostnames);
  }

  /**
   * Identical requests (`sharedBy`: an idempotent resend, the same key and request) share one
   * verification of their single-use token: the first sends it to siteverify, the others wait for
   * its verdict (siteverify would refuse the spent token as timeout-or-duplicate while the first
   * request is still running) and pass if it passed. Any other request presenting the token, or
   * one whose wait ran out or whose verdict failed, is verified as any request is.
   */
  private async verifyShared(token: string, ip: string, hostnames: readonly string[], binding: string): Promise<void> {
    const key = `turnstile-verdict:${sha256Hex(token)}`;
    if (await this.redis.set(key, `pending:${binding}`, 'PX', SHARED_PENDING_MS, 'NX')) {
      try {
        await this.siteverify(token, ip, hostnames);
      } catch (e) {
        await this.redis.del(key);
        throw e;
      }
      await this.redis.set(key, `ok:${binding}`, 'PX', SHARED_VERDICT_MS);
      return;
    }
    const deadline = Date.now() + SHARED_PENDING_MS;
    for (;;) {
      const verdict = await this.redis.get(key);
      if (verdict === `ok:${binding}`) return;
      if (verdict !== `pending:${binding}` || Date.now() >= deadline) break;
      await sleep(50);
    }
    return this.siteverify(token, ip, hostnames);
  }

  private async siteverify(token: string, ip: string, hostnames: readonly string[]): Promise<void> {
    let ok = false;
    try {
      const res = await fetch(this.config.TURNSTILE_SITEVERIFY_URL, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ secret: this.config.TURNSTILE_SECRET!, response: token, remoteip: ip }),
        signal: AbortSignal.timeout(5000),
        // a redirect would re-post the secret to wherever it points
        redirect: 'error',
      });
      // an error status is siteverify failing, not the token: unavailable (503), whatever its body
      if (!res.ok) throw new Error(`siteverify answered HTTP ${res.status}`);
      const json = JSON.parse(await cappedText(res, MAX_ANSWER_BYTES)) as { success?: boolean; hostname?: unknown } | null;
      ok = json?.success === true && solvedOn(json.hostname, hostnames);
    } catch (e) {
      this.logger.warn(`siteverify unreachable: ${(e as Error).message}`);
      throw new AppError('server/unavailable', 'The bot challenge could not be verified; try again');
    }
    if (!ok) throw new AppError('onboarding/bot_check_failed');
  }
}

/**
 * A token solved on another site that uses the same (public) site key is no proof for ours: with
 * `allowed` hostnames, siteverify's `hostname` must be one of them (Cloudflare's advice).
 */
function solvedOn(hostname: unknown, allowed: readonly string[]): boolean {
  return allowed.length === 0 || (typeof hostname === 'string' && allowed.includes(hostname.toLowerCase()));
}

/** Siteverify answers are a few hundred bytes; a larger one is not read to its end. */
const MAX_ANSWER_BYTES = 64 * 1024;

async function cappedText(res: Response, max: number): Promise<string> {
  if (!res.body) return '';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > max) throw new Error(`siteverify answer larger than ${max} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}
