import { Injectable } from '@nestjs/common';
import { AppError } from '../../../shared/errors/app-error';
import { TurnstileService } from '../../tenants/turnstile.service';

/**
 * `captcha_token` of an email-code request, verified with the platform's Turnstile secret when
 * the tenant requires it (tenants.email_otp_captcha_required). Fails closed: a tenant that
 * requires a captcha on a deployment without TURNSTILE_SECRET gets 503, never a silent pass.
 */
@Injectable()
export class OtpCaptcha {
  constructor(private readonly turnstile: TurnstileService) {}

  async verify(token: string | undefined, ip: string): Promise<void> {
    if (!this.turnstile.enabled) throw new AppError('server/unavailable', 'This application requires a captcha, but no TURNSTILE_SECRET is configured');
    if (!token) throw new AppError('captcha/failed', 'captcha_token is required by this application', { errors: [{ field: 'captcha_token', message: 'is required' }] });
    try {
      await this.turnstile.verify(token, ip);
    } catch (e) {
      if (e instanceof AppError && e.code === 'onboarding/bot_check_failed') throw new AppError('captcha/failed');
      throw e;
    }
  }
}
