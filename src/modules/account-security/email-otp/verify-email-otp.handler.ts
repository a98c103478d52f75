import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { countedSignIn } from '../../../shared/http/metrics';
import { mailboxSpelling, normalizeEmail } from '../../users/email';
import { UserEmailPolicy } from '../../users/user-email-policy.service';
import { AMR_EMAIL_OTP } from '../account-security.constants';
import { EmailCodes } from '../email-codes.service';
import { PasswordlessResponse, PasswordlessSignIn, ProvenUser } from '../passwordless-sign-in.service';
import { assertBinding } from '../resume-binding';
import { TenantFlags } from '../tenant-flags';
import { VerifyEmailOtpCommand } from './email-otp.commands';

/**
 * One attempt counted atomically before the comparison, per address over every code (429
 * auth/login_throttled past EMAIL_CODE_FAILURES_PER_ADDRESS in the window, unknown addresses
 * alike) and per code (at most 5, then it is dead), constant-time comparison, one winner among
 * parallel correct attempts. An existing account signs in (its address becomes verified); under
 * login_or_create a new address gets a verified account.
 */
@CommandHandler(VerifyEmailOtpCommand)
export class VerifyEmailOtpHandler implements ICommandHandler<VerifyEmailOtpCommand, PasswordlessResponse> {
  constructor(
    private readonly db: Db,
    private readonly flags: TenantFlags,
    private readonly codes: EmailCodes,
    private readonly signIn: PasswordlessSignIn,
    private readonly policy: UserEmailPolicy,
  ) {}

  /** Counted in authp_sign_ins_total{method="email_otp"}. */
  execute(cmd: VerifyEmailOtpCommand): Promise<PasswordlessResponse> {
    return countedSignIn('email_otp', this.verify(cmd));
  }

  private async verify(cmd: VerifyEmailOtpCommand): Promise<PasswordlessResponse> {
    const tenantId = cmd.apiKey.tenantId;
    await this.flags.requireEmailOtp(tenantId);
    const email = normalizeEmail(cmd.body.email);
    const target = { purpose: 'login', tenantId, emailNormalized: email } as const;
    const row = await this.codes.attempt(target, cmd.body.code, cmd.client.ip);
    if (!row) throw new AppError('otp/invalid');
    assertBinding(row.binding_hash, cmd.body.resume_binding);
    // an account is created here: the tenant's address policy of now applies (it may have changed since the request)
    if (!row.user_id) await this.policy.assertAllowed(tenantId, row.email_normalized);
    const user = await this.db.tx(async (tx): Promise<ProvenUser> => {
      if (!(await this.codes.consume(tx, row))) throw new AppError('otp/invalid');
      const u = row.user_id
        ? await this.signIn.proveEmail(tx, tenantId, row.user_id, row.email_normalized, 'email_otp')
        : row.mode === 'login_or_create'
          ? await this.signIn.createOrProve(tx, cmd.apiKey, mailboxSpelling(cmd.body.email), row.email_normalized, 'email_otp')
          : undefined;
      if (!u) throw new AppError('otp/invalid');
      return u;
    });
    await this.codes.signedIn(target, cmd.client.ip);
    return this.signIn.finish(user, { key: cmd.apiKey, method: 'email_otp', amr: AMR_EMAIL_OTP, oauthParams: row.oauth_params, deadProof: 'otp/invalid' });
  }
}
