import { Command } from '@nestjs/cqrs';
import { ClientInfoValue } from '../../../shared/auth/auth-context';
import { SignupRequestDto } from './signup.request.dto';

export interface SignupResponse {
  tenant: { id: string; slug: string; name: string; tier: string };
  user: { id: string; email: string };
  csrf_token: string;
}

export interface SignupResult {
  body: SignupResponse;
  /** dashboard session cookie value; absent for the honeypot decoy */
  sessionToken?: string;
}

/** spec 2.1: creates a tenant, its owner and a dashboard session. */
export class SignupCommand extends Command<SignupResult> {
  constructor(
    readonly body: SignupRequestDto,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
