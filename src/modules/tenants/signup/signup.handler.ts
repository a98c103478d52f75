import { randomUUID } from 'crypto';
import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { DashboardSessionService } from '../../../shared/auth/dashboard-session.service';
import { ClientHasher } from '../../../shared/crypto/client-hash';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { randomToken } from '../../../shared/crypto/tokens';
import { Db, Queryable, isUniqueViolation } from '../../../shared/db/db.service';
import { IdempotencyService, requestHash } from '../../../shared/db/idempotency';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { LoginThrottleService } from '../../../shared/rate-limit/login-throttle.service';
import { REDIS } from '../../../shared/redis/redis.module';
import { DashboardAudit } from '../../dashboard-auth/dashboard-audit.service';
import { lockAccountWithPassword } from '../../dashboard-auth/password-still';
import { mailboxSpelling, normalizeEmail } from '../../users/email';
import { slugify, suffixedSlug } from '../slug';
import { TurnstileService } from '../turnstile.service';
import { SignupCommand, SignupResponse, SignupResult } from './signup.command';

@CommandHandler(SignupCommand)
export class SignupHandler implements ICommandHandler<SignupCommand, SignupResult> {
  constructor(
    private readonly db: Db,
    private readonly idempotency: IdempotencyService,
    private readonly hasher: PasswordHasher,
    private readonly sessions: DashboardSessionService,
    private readonly events: EventsService,
    private readonly turnstile: TurnstileService,
    private readonly throttle: LoginThrottleService,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clientHasher: ClientHasher,
    private readonly audit: DashboardAudit,
  ) {}

  async execute({ body, client }: SignupCommand): Promise<SignupResult> {
    // A resent request (same idempotency_key, same request) passed the bot challenge the first
    // time; its token is single-use (siteverify answers timeout-or-duplicate), so checking it again
    // would refuse the very retry the key exists for. The replay proves the password instead.
    // One still running has not committed its answer: the two share one verification of the token
    // (the second waits for the first's verdict), then the idempotency record replays the answer.
    const resent = this.turnstile.enabled && body.idempotency_key ? await this.idempotency.holds('signup', body.idempotency_key, signupHash(body)) : false;
    const sharedBy = body.idempotency_key ? `signup:${body.idempotency_key}:${signupHash(body)}` : undefined;
    if (!resent) await this.turnstile.verify(body.turnstile_token, client.ip, this.config.turnstileHostnames, { sharedBy });
    if (body.website && body.website.trim() !== '') return this.decoy(body, client.ip, resent);
    if (!body.idempotency_key) {
      const passwordHash = await this.hasher.hash(body.password);
      const created = await this.db.tx(async (tx) => {
        const r = await this.create(tx, body, passwordHash);
        return { body: r.body, sessionToken: r.secret.session };
      });
      await this.signedIn(body.email, client.ip);
      return created;
    }
    // hashed before the idempotency record's transaction opens: a hash waits its turn behind every
    // other (PasswordHasher caps them at the core count), and a transaction must not sit idle that
    // long (DATABASE_STATEMENT_TIMEOUT_MS ends it); a replay pays one hash it does not use
    const passwordHash = await this.hasher.hash(body.password);
    const r = await this.idempotency.run<SignupResponse>('signup', body.idempotency_key, signupHash(body), (tx) => this.create(tx, body, passwordHash), { replayOnly: resent });
    // A replay hands out the owner's session again: only to a request that proves the password
    // (checked against the stored argon2 hash; the key alone is not a credential). A wrong one
    // is the same 409 as any other request that differs from the first.
    if (!r.replayed) {
      await this.signedIn(body.email, client.ip);
      return { body: r.body, sessionToken: r.secret?.session };
    }
    let judgedHash: string | undefined;
    await this.proveReplay(body.email, client.ip, async () => {
      const [u] = await this.db.query<{ password_hash: string | null }>(`SELECT password_hash FROM dashboard_users WHERE id = $1`, [r.body.user.id]);
      judgedHash = u?.password_hash ?? undefined;
      return this.hasher.verifyOrDummy(u?.password_hash, body.password);
    });
    // the session handed out first may have ended since (a logout, a password reset, its absolute
    // timeout, which comes before the key's): the proven password opens a new one as a dashboard
    // login does (the account locked and its password checked again: a reset committed since the
    // check ends what the old password opened), rather than a cookie that cannot work
    if (r.secret?.session && (await this.sessions.find(r.secret.session))) return { body: r.body, sessionToken: r.secret.session };
    const fresh = await this.db.tx(async (tx) => {
      await lockAccountWithPassword(tx, this.hasher, r.body.user.id, judgedHash!, body.password);
      await this.audit.signedIn(tx, r.body.user.id, client);
      return this.sessions.create(tx, r.body.user.id);
    });
    return { body: { ...r.body, csrf_token: fresh.csrfToken }, sessionToken: fresh.token };
  }

  /**
   * The honeypot was filled: a bot. It gets the answers a real signup would give, so nothing tells
   * it apart: the same refusal of a taken email (its own decoy emails included, remembered for
   * IDEMPOTENCY_TTL_SECONDS), a slug made unique the same way, the same password-hashing time, a
   * decoy session cookie, and with an idempotency key the same replay (the same answer for the
   * same password, 409 for another or for another request). Nothing is created but the
   * idempotency record and the remembered email.
   */
  private async decoy(body: SignupCommand['body'], ip: string, resent: boolean): Promise<SignupResult> {
    const passwordHash = await this.hasher.hash(body.password);
    if (!body.idempotency_key) {
      const d = await this.decoyAnswer(body);
      return { body: d.body, sessionToken: d.secret.session };
    }
    const r = await this.idempotency.run<SignupResponse>('signup', body.idempotency_key, signupHash(body), async () => {
      const d = await this.decoyAnswer(body);
      return { ...d, secret: { ...d.secret, decoy_password_hash: passwordHash } };
    }, { replayOnly: resent });
    // counted as a real replay is, so nothing tells the two apart (a full hashing queue is the same
    // 503 too, not a 409); but no account signed in here,
    // so the address is not made known to the throttle for that email (an owner who signs up
    // later must not find addresses of a bot's choosing past the account-wide limit)
    if (r.replayed) await this.proveReplay(body.email, ip, () => this.hasher.verifyOrDummy(r.secret?.decoy_password_hash, body.password), false);
    return { body: r.body, sessionToken: r.secret?.session };
  }

  private async decoyAnswer(body: SignupCommand['body']): Promise<{ status: number; body: SignupResponse; secret: { session: string } }> {
    const name = body.tenant_name.trim();
    const email = mailboxSpelling(body.email);
    const [taken] = await this.db.query<{ email: boolean; slug: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM dashboard_users WHERE email_normalized = $1) AS email, EXISTS (SELECT 1 FROM tenants WHERE slug = $2) AS slug`,
      [normalizeEmail(email), slugify(name)],
    );
    const remembered = await this.redis.set(`signup-decoy:${this.clientHasher.subject(`signup-decoy:${normalizeEmail(email)}`)}`, '1', 'EX', this.config.IDEMPOTENCY_TTL_SECONDS, 'NX');
    if (taken.email || remembered !== 'OK') throw new AppError('onboarding/email_exists', 'This email already has a dashboard account: sign in to it (another tenant can invite it as a member)');
    return {
      status: 201,
      body: {
        tenant: { id: randomUUID(), slug: taken.slug ? suffixedSlug(slugify(name)) : slugify(name), name, tier: 'free' },
        user: { id: randomUUID(), email },
        csrf_token: randomToken(),
      },
      secret: { session: randomToken() },
    };
  }

  /**
   * A replay hands out the owner's session again, so its password check is a sign-in: counted by
   * the failed sign-in throttle like one (429 auth/login_throttled past its limits), the count
   * taken back when it matches; a wrong password is 409 as any other differing request.
   */
  private async proveReplay(email: string, ip: string, matches: () => Promise<boolean>, accountExists = true): Promise<void> {
    const account = normalizeEmail(email.trim());
    // a decoy counts exactly as a real replay does (so nothing tells them apart), but no account
    // signed in: the address is not made known for that email
    if (!(await this.throttle.judge('dashboard', account, ip, matches, { trust: accountExists }))) throw new AppError('idempotency/conflict');
  }

  /** The owner signed in from this address: it is known to the failed-login throttle (LoginThrottleService). */
  private signedIn(email: string, ip: string): Promise<void> {
    return this.throttle.trustAddress('dashboard', normalizeEmail(email.trim()), ip);
  }

  private async create(tx: Queryable, body: SignupCommand['body'], passwordHash: string) {
    const name = body.tenant_name.trim();
    const email = mailboxSpelling(body.email);
    let user: { id: string };
    try {
      [user] = await tx.query<{ id: string }>(
        `INSERT INTO dashboard_users (email, email_normalized, password_hash, consent_marketing, terms_accepted_at, privacy_accepted_at)
         VALUES ($1, $2, $3, $4, now(), now()) RETURNING id`,
        [email, normalizeEmail(email), passwordHash, body.consent_marketing ?? false],
      );
    } catch (e) {
      if (isUniqueViolation(e)) throw new AppError('onboarding/email_exists', 'This email already has a dashboard account: sign in to it (another tenant can invite it as a member)');
      throw e;
    }
    const tenant = await this.insertTenant(tx, name);
    await tx.query(`INSERT INTO tenant_members (tenant_id, user_id, role) VALUES ($1, $2, 'owner')`, [tenant.id, user.id]);
    // audited only: no webhook, the tenant cannot have an endpoint yet (see webhook-events.ts)
    await this.events.audit(tx, {
      tenantId: tenant.id,
      type: 'tenant.created',
      actorType: 'dashboard_user',
      actorId: user.id,
      targetType: 'tenant',
      targetId: tenant.id,
      metadata: { consent_marketing: body.consent_marketing ?? false },
    });
    const session = await this.sessions.create(tx, user.id);
    return {
      status: 201,
      body: {
        tenant: { id: tenant.id, slug: tenant.slug, name, tier: tenant.tier },
        user: { id: user.id, email },
        csrf_token: session.csrfToken,
      },
      secret: { session: session.token },
    };
  }

  /** A unique slug: the name's, else with a random suffix (savepoint keeps the transaction usable). */
  private async insertTenant(tx: Queryable, name: string): Promise<{ id: string; slug: string; tier: string }> {
    const base = slugify(name);
    for (let attempt = 0; attempt < 8; attempt++) {
      const slug = attempt === 0 ? base : suffixedSlug(base);
      await tx.query('SAVEPOINT tenant_slug');
      try {
        const [t] = await tx.query<{ id: string; slug: string; tier: string }>(
          `INSERT INTO tenants (slug, name) VALUES ($1, $2) RETURNING id, slug, tier`,
          [slug, name],
        );
        await tx.query('RELEASE SAVEPOINT tenant_slug');
        return t;
      } catch (e) {
        await tx.query('ROLLBACK TO SAVEPOINT tenant_slug');
        if (!isUniqueViolation(e, 'tenants_slug_uq')) throw e;
      }
    }
    throw new AppError('server/error', 'Could not allocate a tenant slug');
  }
}

/**
 * What a signup asks for, defaults applied and the email and name as they are stored, so an
 * explicit default (consent_marketing: false, website: "") or another spelling of the same email
 * is the same request; the password stays out (a fast hash of it would be crackable).
 */
function signupHash(body: SignupCommand['body']): string {
  return requestHash({
    email: normalizeEmail(body.email.trim()),
    tenant_name: body.tenant_name.trim(),
    consent_terms: body.consent_terms,
    consent_privacy: body.consent_privacy,
    consent_marketing: body.consent_marketing ?? false,
  });
}
