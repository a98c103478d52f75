import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { noticeMfaChange } from '../mfa-notice';
import { MfaConfirmationService } from '../mfa-confirmation.service';
import { MfaFactorsService } from '../mfa-factors.service';
import { DisableMfaCommand } from './disable-mfa.command';

/** Issue 5 item 5: disable needs a code (TOTP or recovery) and the password; audited high. */
@CommandHandler(DisableMfaCommand)
export class DisableMfaHandler implements ICommandHandler<DisableMfaCommand, void> {
  constructor(
    private readonly confirmation: MfaConfirmationService,
    private readonly factors: MfaFactorsService,
    private readonly events: EventsService,
    private readonly mail: MailService,
  ) {}

  async execute({ user, code, password, client }: DisableMfaCommand): Promise<void> {
    await this.confirmation.run(user, { password, code, allowRecovery: true }, client, async (tx, method) => {
      if (!(await this.factors.remove(tx, user.tenantId, user.userId))) throw new AppError('mfa/not_enabled');
      await this.events.audit(tx, {
        tenantId: user.tenantId,
        type: 'user.mfa_disabled',
        actorType: 'user',
        actorId: user.userId,
        targetType: 'user',
        targetId: user.userId,
        severity: 'high',
        metadata: { factor: 'totp', proof: method },
      });
      await noticeMfaChange(tx, this.mail, user, 'disabled');
    });
  }
}
