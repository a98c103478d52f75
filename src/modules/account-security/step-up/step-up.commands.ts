import { Command } from '@nestjs/cqrs';
import { ClientInfoValue, UserPrincipal } from '../../../shared/auth/auth-context';
import { StepUpInitiatedResponse } from './step-up.request.dto';
import { StepUpResponseDto } from '../../mfa/mfa.response.dto';

export type StepUpChannel = 'magic_link' | 'email_otp';

/** Mails a step-up link or code for the bearer's session to the account's address. */
export class InitiateStepUpCommand extends Command<StepUpInitiatedResponse> {
  constructor(
    readonly channel: StepUpChannel,
    readonly user: UserPrincipal,
    readonly actionHint: string | undefined,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}

/** Completes a step-up with the link's token or the code: a fresh access token for the same session. */
export class CompleteStepUpCommand extends Command<StepUpResponseDto> {
  constructor(
    readonly channel: StepUpChannel,
    readonly user: UserPrincipal,
    /** the link's token, or the code */
    readonly secret: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
