import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { EventsService } from '../../../shared/events/events.service';
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
      return fresh;
    });
    return { recovery_codes: codes };
  }
}
