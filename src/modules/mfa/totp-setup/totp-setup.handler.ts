import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { MfaFactorsService } from '../mfa-factors.service';
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
      const [u] = await tx.query<{ email: string | null; tenant_name: string }>(
        `SELECT u.email, t.name AS tenant_name FROM users u JOIN tenants t ON t.id = u.tenant_id
          WHERE u.id = $1 AND u.tenant_id = $2 AND NOT u.is_anonymous`,
        [user.userId, user.tenantId],
      );
      if (!u?.email) throw new AppError('auth/forbidden', 'Only registered users with an email can enroll in MFA');
      const secret = await this.factors.startSetup(tx, user.tenantId, user.userId);
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
