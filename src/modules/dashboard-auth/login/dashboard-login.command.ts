import { Command } from '@nestjs/cqrs';
import { ClientInfoValue } from '../../../shared/auth/auth-context';
import { DashboardSessionResponse } from '../dashboard-auth.dto';

export interface DashboardLoginResult {
  body: DashboardSessionResponse;
  sessionToken: string;
}

/** Dashboard password sign-in (throttled like end-user login). */
export class DashboardLoginCommand extends Command<DashboardLoginResult> {
  constructor(
    readonly email: string,
    readonly password: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
