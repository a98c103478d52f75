import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { noticeMfaChange } from '../mfa-notice';
import { MfaConfirmationService } from '../mfa-confirmation.service';
import { MfaFactorsService } from '../mfa-factors.service';
import { RecoveryCodesResponseDto } from '../mfa.response.dto';
import { RegenerateRecoveryCodesCommand } from './regenerate-recovery-codes.command';

@CommandHandler(RegenerateRecoveryCodesCommand)
export class RegenerateRecoveryCodesHandler implements ICommandHandler<RegenerateRecoveryCodesCommand, RecoveryCodesResponseDto> {
  constructor(
    private readonly confirmation: MfaConfirmationService,
    private readonly factors: MfaFactorsService,
    private readonly events: EventsService,
    private readonly mail: MailService,
  ) {}

  async execute({ user, code, password, client }: RegenerateRecoveryCodesCommand): Promise<RecoveryCodesResponseDto> {
    const codes = await this.confirmation.run(user, { password, code, allowRecovery: false }, client, async (tx) => {
      const fresh = await this.factors.replaceRecoveryCodes(tx, user.tenantId, user.userId);
      await this.events.audit(tx, {
        tenantId: user.tenantId,
        type: 'user.mfa_recovery_codes_regenerated',
        actorType: 'user',
        actorId: user.userId,
        targetType: 'user',
        targetId: user.userId,
        severity: 'medium',
      });
      await noticeMfaChange(tx, this.mail, user, 'recovery_codes_regenerated');
      return fresh;
    });
    return { recovery_codes: codes };
  }
}
