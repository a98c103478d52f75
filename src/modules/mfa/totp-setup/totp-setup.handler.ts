import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError, insufficientScope, InvalidTokenError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { MfaFactorsService, setupCaller } from '../mfa-factors.service';
import { TotpSetupResponseDto } from '../mfa.response.dto';
import { otpauthUrl } from '../totp';
import { TotpSetupCommand } from './totp-setup.command';

/** Issue 5 item 5: seed stored envelope-encrypted and pending; the tenant's name is the issuer. */
@CommandHandler(TotpSetupCommand)
export class TotpSetupHandler implements ICommandHandler<TotpSetupCommand, TotpSetupResponseDto> {
  constructor(
    private readonly db: Db,
    private readonly factors: MfaFactorsService,
    private readonly events: EventsService,
  ) {}

  async execute({ user }: TotpSetupCommand): Promise<TotpSetupResponseDto> {
    return this.db.tx(async (tx) => {
      const [u] = await tx.query<{ email: string | null; is_anonymous: boolean; tenant_name: string }>(
        `SELECT u.email, u.is_anonymous, t.name AS tenant_name FROM users u JOIN tenants t ON t.id = u.tenant_id
          WHERE u.id = $1 AND u.tenant_id = $2
          FOR KEY SHARE OF u`,
        [user.userId, user.tenantId],
      );
      // the row locked until the factor is stored: an erasure committed since the token was issued
      // leaves no row (the token's user is gone), one in flight waits
      if (!u) throw new InvalidTokenError('invalid_token', 'The user no longer exists');
      if (u.is_anonymous || !u.email) throw insufficientScope('Only registered users with an email can enroll in MFA');
      const secret = await this.factors.startSetup(tx, user.tenantId, user.userId, setupCaller(user));
      if (!secret) throw new AppError('mfa/already_enabled', 'Disable MFA first to enroll a new authenticator');
      await this.events.audit(tx, {
        tenantId: user.tenantId,
        type: 'user.mfa_setup_started',
        actorType: 'user',
        actorId: user.userId,
        targetType: 'user',
        targetId: user.userId,
        metadata: { factor: 'totp' },
      });
      return { secret, otpauth_url: otpauthUrl(u.tenant_name, u.email, secret) };
    });
  }
}
