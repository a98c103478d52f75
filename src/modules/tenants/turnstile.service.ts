import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { AppError } from '../../shared/errors/app-error';

/** Verifies a bot-challenge token against the siteverify URL (Cloudflare Turnstile protocol). */
@Injectable()
export class TurnstileService {
  private readonly logger = new Logger(TurnstileService.name);
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  get enabled(): boolean {
    return Boolean(this.config.TURNSTILE_SECRET);
  }

  async verify(token: string | undefined, ip: string): Promise<void> {
    if (!this.enabled) return;
    if (!token) throw new AppError('onboarding/bot_check_failed', 'turnstile_token is required');
    let ok = false;
    try {
      const res = await fetch(this.config.TURNSTILE_SITEVERIFY_URL, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ secret: this.config.TURNSTILE_SECRET!, response: token, remoteip: ip }),
        signal: AbortSignal.timeout(5000),
      });
      const json = (await res.json()) as { success?: boolean };
      ok = res.ok && json.success === true;
    } catch (e) {
      this.logger.warn(`siteverify unreachable: ${(e as Error).message}`);
      throw new AppError('server/unavailable', 'The bot challenge could not be verified; try again');
    }
    if (!ok) throw new AppError('onboarding/bot_check_failed');
  }
}
