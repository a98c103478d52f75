import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { countedSignIn } from '../../../shared/http/metrics';
import { AMR_MAGIC_LINK } from '../account-security.constants';
import { OneTimeTokens } from '../one-time-tokens.service';
import { PasswordlessResponse, PasswordlessSignIn } from '../passwordless-sign-in.service';
import { assertBinding } from '../resume-binding';
import { TenantFlags } from '../tenant-flags';
import { VerifyMagicLinkCommand } from './magic-link.commands';

/**
 * Single use (conditional update), only with the API key of the tenant that issued it, only as a
 * magic link (a reset or verification token is not one), and in the browser that asked when a
 * resume_binding was given (checked before the link is used, so a wrong browser does not burn
 * it). Signing in proves the mailbox: the address becomes verified.
 */
@CommandHandler(VerifyMagicLinkCommand)
export class VerifyMagicLinkHandler implements ICommandHandler<VerifyMagicLinkCommand, PasswordlessResponse> {
  constructor(
    private readonly db: Db,
    private readonly flags: TenantFlags,
    private readonly tokens: OneTimeTokens,
    private readonly signIn: PasswordlessSignIn,
  ) {}

  /** Counted in authp_sign_ins_total{method="magic_link"}. */
  execute(cmd: VerifyMagicLinkCommand): Promise<PasswordlessResponse> {
    return countedSignIn('magic_link', this.verify(cmd));
  }

  private async verify(cmd: VerifyMagicLinkCommand): Promise<PasswordlessResponse> {
    const tenantId = cmd.apiKey.tenantId;
    await this.flags.requireMagicLink(tenantId);
    const found = await this.tokens.find(this.db, tenantId, 'magic_link', cmd.token);
    if (!found) throw new AppError('token/invalid');
    assertBinding(found.binding_hash, cmd.resumeBinding);
    const { user, oauthParams } = await this.db.tx(async (tx) => {
      const row = await this.tokens.consume(tx, tenantId, 'magic_link', cmd.token);
      if (!row) throw new AppError('token/invalid');
      const u = await this.signIn.proveEmail(tx, tenantId, row.user_id, row.email_normalized, 'magic_link');
      if (!u) throw new AppError('token/invalid');
      return { user: u, oauthParams: row.oauth_params };
    });
    return this.signIn.finish(user, { key: cmd.apiKey, method: 'magic_link', amr: AMR_MAGIC_LINK, oauthParams, deadProof: 'token/invalid' });
  }
}
