import { randomUUID } from 'crypto';
import { CommandBus, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { EnvelopeCipher } from '../../../shared/crypto/envelope-cipher';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { Db, isUniqueViolation } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { LoginThrottleService, passwordSignInRealm } from '../../../shared/rate-limit/login-throttle.service';
import { SessionsService, TokenResponse } from '../../sessions/sessions.service';
import { mailboxSpelling, normalizeEmail } from '../email';
import { activityCtes } from '../../sessions/activity.sql';
import { LoginPolicy } from '../login-policy.service';
import { UserEmailPolicy } from '../user-email-policy.service';
import { ClaimGuestCommand } from '../claim-guest/claim-guest.command';
import { RegisterUserCommand } from './register-user.command';

@CommandHandler(RegisterUserCommand)
export class RegisterUserHandler implements ICommandHandler<RegisterUserCommand, TokenResponse> {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly cipher: EnvelopeCipher,
    private readonly events: EventsService,
    private readonly sessions: SessionsService,
    private readonly emailPolicy: UserEmailPolicy,
    private readonly commandBus: CommandBus,
    private readonly throttle: LoginThrottleService,
    private readonly loginPolicy: LoginPolicy,
  ) {}

  async execute(cmd: RegisterUserCommand): Promise<TokenResponse> {
    // the API key query already read the tenant's settings (register always has a key)
    const tenant = cmd.apiKey.tenant;
    const { body } = cmd;
    // spec 2.2 lists both tokens; nothing here issues them (no end-user invitations, no wallet age
    // verification), so none can be honoured: refused, never silently dropped (a client would
    // believe the invitation was taken or the age proven)
    if (body.invite_token !== undefined) {
      throw new AppError('user/invite_invalid', 'No invitation matches invite_token: this service issues no end-user invitations; register without it', {
        errors: [{ field: 'invite_token', message: 'invite_token names no invitation' }],
      });
    }
    if (body.age_verification_token !== undefined) {
      throw new AppError('user/age_verification_invalid', 'No age verification matches age_verification_token: this service offers none; send date_of_birth', {
        errors: [{ field: 'age_verification_token', message: 'age_verification_token names no age verification' }],
      });
    }
    if (tenant.minorProtectionEnabled && !body.date_of_birth) {
      throw new AppError('user/date_of_birth_required', undefined, {
        errors: [{ field: 'date_of_birth', message: 'date_of_birth is required by this tenant' }],
      });
    }
    const email = normalizeEmail(body.email);
    await this.emailPolicy.assertAllowed(cmd.tenantId, email);
    const passwordHash = await this.hasher.hash(body.password);
    const dobEnc = body.date_of_birth ? this.cipher.encrypt(body.date_of_birth, `dob:${cmd.tenantId}`) : null;

    // registering signs the user in with that password from this address: from then on the address
    // is known to the failed-login throttle, so a distributed attack cannot lock the new owner out
    const signedIn = <T>(tokens: T) => this.throttle.trustAddress(passwordSignInRealm(cmd.tenantId), email, cmd.client.ip).then(() => tokens);
    if (cmd.bearer) {
      // contract: register with a guest's bearer claims that guest (same user id)
      return this.commandBus
        .execute<ClaimGuestCommand, TokenResponse>(
          new ClaimGuestCommand(cmd.tenantId, cmd.bearer, { email: mailboxSpelling(body.email), emailNormalized: email, passwordHash, dateOfBirthEnc: dobEnc, method: 'password' }),
        )
        .then(signedIn);
    }

    // spec 2.8 mfa_policy required: the new user's grace starts now (as sign-in says it); read
    // before the transaction, which then holds one connection only
    const userId = randomUUID();
    const extraClaims = await this.loginPolicy.forNewAccount({ id: userId, tenant_id: cmd.tenantId }, ['pwd']);
    try {
      const tokens = await this.db.tx(async (tx) => {
        const [user] = await tx.query<{ id: string; created_at: Date }>(
          `INSERT INTO users (id, tenant_id, email, email_normalized, password_hash, role, date_of_birth_enc, consent_at, created_by_api_key_id, last_sign_in_at)
           VALUES ($8, $1, $2, $3, $4, $5, $6, now(), $7, now()) RETURNING id, created_at`,
          [cmd.tenantId, mailboxSpelling(body.email), email, passwordHash, tenant.defaultUserRole, dobEnc, cmd.apiKey.id, userId],
        );
        await tx.query(`WITH ${activityCtes('$1')} SELECT 1`, [user.id]); // counts the new user's month
        await this.events.audit(tx, {
          tenantId: cmd.tenantId,
          type: 'user.registered',
          actorType: 'user',
          actorId: user.id,
          targetType: 'user',
          targetId: user.id,
          metadata: { method: 'password' },
        });
        await this.emailPolicy.afterRegister(tx, { tenantId: cmd.tenantId, tenantName: tenant.name, userId: user.id, email: mailboxSpelling(body.email) });
        const sessionUser = { id: user.id, tenant_id: cmd.tenantId, email: mailboxSpelling(body.email), email_verified: false, is_anonymous: false, role: tenant.defaultUserRole, created_at: user.created_at };
        const { sessionId: _sid, ...tokens } = await this.sessions.start(tx, sessionUser, tenant.userScopes, {
          amr: ['pwd'],
          apiKeyId: cmd.apiKey.id,
          extraClaims,
        });
        return tokens;
      });
      return await signedIn(tokens);
    } catch (e) {
      if (isUniqueViolation(e)) throw new AppError('user/email_exists');
      throw e;
    }
  }
}
