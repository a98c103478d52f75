import { createHmac, randomBytes, randomInt } from 'crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { EnvelopeCipher } from '../../shared/crypto/envelope-cipher';
import { safeEqual } from '../../shared/crypto/tokens';
import { Db, Queryable } from '../../shared/db/db.service';
import { LoginThrottleService, ThrottleLimits } from '../../shared/rate-limit/login-throttle.service';
import { EMAIL_OTP_MAX_ATTEMPTS, EMAIL_OTP_TTL_SECONDS } from './account-security.constants';

export interface CodeRow {
  id: string;
  user_id: string | null;
  email_normalized: string;
  mode: 'login' | 'login_or_create';
  binding_hash: string | null;
  oauth_params: Record<string, string> | null;
  attempts: number;
  /** the hash of the code that matched: `consume` uses that code only, not one issued since in the same row */
  code_hash: string;
}

/** Which live code an attempt is for: an address's sign-in code, or a session's step-up code. */
export type CodeTarget =
  | { purpose: 'login'; tenantId: string; emailNormalized: string }
  | { purpose: 'step_up'; tenantId: string; userId: string; sessionId: string };

/**
 * LoginThrottleService realm and account of a code's wrong guesses, over every code: sign-in codes
 * per address (known or not, so the count reveals nothing), step-up codes per user (all sessions).
 * Realms of their own: wrong codes do not block password sign-in, nor the reverse.
 */
export function codeThrottleSubject(target: CodeTarget): { realm: string; account: string } {
  return target.purpose === 'login'
    ? { realm: `email-code:${target.tenantId}`, account: target.emailNormalized }
    : { realm: `step-up-code:${target.tenantId}`, account: target.userId };
}

export interface IssueLoginCode {
  tenantId: string;
  emailNormalized: string;
  userId: string | null;
  mode: 'login' | 'login_or_create';
  bindingHash: string | null;
  oauthParams: Record<string, string> | null;
}

/**
 * 6-digit email codes (sign-in and step-up). Stored as HMAC-SHA256 under a key derived from
 * KEY_ENCRYPTION_KEY with a per-code salt (a database dump alone does not reveal them), one live
 * code per address (per session for step-up), 10 minutes, and at most 5 evaluations counted by a
 * single conditional UPDATE before any comparison, so parallel guesses cannot exceed the limit.
 * A new code starts its 5 again, so wrong guesses are also counted per address (per user for
 * step-up) over every code and client address: see `attempt`. New codes are keyed under the
 * current KEY_ENCRYPTION_KEY; a code keyed under one of KEY_ENCRYPTION_KEY_PREVIOUS (issued just
 * before a rotation) still matches for its 10 minutes.
 */
@Injectable()
export class EmailCodes {
  /** the current key first (new codes), then those of KEY_ENCRYPTION_KEY_PREVIOUS */
  private readonly keys: Buffer[];

  constructor(
    private readonly db: Db,
    cipher: EnvelopeCipher,
    private readonly throttle: LoginThrottleService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.keys = cipher.deriveKeys('email-otp');
  }

  /**
   * Wrong codes per account from all client addresses (EMAIL_CODE_FAILURES_PER_ADDRESS in
   * EMAIL_CODE_FAILURE_WINDOW_SECONDS); per (account, address) pair and per address the login
   * throttle's. The account limit does not apply to an address that signed in with a code before
   * (`signedIn`): the owner's usual address stays open while an attacker trips it.
   */
  private limits(): ThrottleLimits {
    const c = this.config;
    return {
      perAccountIp: c.LOGIN_FAILURES_PER_ACCOUNT_IP,
      perAccount: c.EMAIL_CODE_FAILURES_PER_ADDRESS,
      perIp: c.LOGIN_FAILURES_PER_IP,
      windowSeconds: c.EMAIL_CODE_FAILURE_WINDOW_SECONDS,
    };
  }

  /** A fresh uniformly random 6-digit code with its salt and HMAC. */
  newCode(): { code: string; salt: string; hash: string } {
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const salt = randomBytes(16).toString('base64url');
    return { code, salt, hash: this.hash(salt, code) };
  }

  private hash(salt: string, code: string, key = this.keys[0]): string {
    return createHmac('sha256', key).update(`${salt}:${code}`).digest('hex');
  }

  /** Whether `code` is the one stored as `hash`, keyed under any configured key (each compared in constant time). */
  private matches(salt: string, code: string, hash: string): boolean {
    let ok = false;
    for (const key of this.keys) ok = safeEqual(this.hash(salt, code, key), hash) || ok;
    return ok;
  }

  /** Replaces the address's live sign-in code (attempts start again at 0). */
  async issueLogin(tx: Queryable, c: IssueLoginCode): Promise<string> {
    const { code, salt, hash } = this.newCode();
    await tx.query(
      `INSERT INTO email_otp_codes (tenant_id, purpose, email_normalized, user_id, mode, code_hash, salt, binding_hash, oauth_params, expires_at)
       VALUES ($1, 'login', $2, $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9))
       ON CONFLICT (tenant_id, email_normalized) WHERE purpose = 'login' DO UPDATE
          SET user_id = EXCLUDED.user_id, mode = EXCLUDED.mode, code_hash = EXCLUDED.code_hash, salt = EXCLUDED.salt,
              attempts = 0, binding_hash = EXCLUDED.binding_hash, oauth_params = EXCLUDED.oauth_params,
              created_at = now(), expires_at = EXCLUDED.expires_at, consumed_at = NULL`,
      [c.tenantId, c.emailNormalized, c.userId, c.mode, hash, salt, c.bindingHash, c.oauthParams ? JSON.stringify(c.oauthParams) : null, EMAIL_OTP_TTL_SECONDS],
      'email_otp_issue_login',
    );
    return code;
  }

  /**
   * Voids the address's live sign-in code (also one issued before the account existed): a
   * password reset ends trust in every sign-in secret issued before it. (Step-up codes need their
   * session, which the reset ends.)
   */
  async voidLogin(tx: Queryable, c: { tenantId: string; emailNormalized: string }): Promise<void> {
    await tx.query(
      `UPDATE email_otp_codes SET consumed_at = now()
        WHERE tenant_id = $1 AND email_normalized = $2 AND purpose = 'login' AND consumed_at IS NULL`,
      [c.tenantId, c.emailNormalized],
    );
  }

  /** Replaces the session's live step-up code. */
  async issueStepUp(tx: Queryable, c: { tenantId: string; userId: string; sessionId: string; emailNormalized: string }): Promise<string> {
    const { code, salt, hash } = this.newCode();
    await tx.query(
      `INSERT INTO email_otp_codes (tenant_id, purpose, email_normalized, user_id, session_id, code_hash, salt, expires_at)
       VALUES ($1, 'step_up', $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
       ON CONFLICT (session_id) WHERE purpose = 'step_up' DO UPDATE
          SET email_normalized = EXCLUDED.email_normalized, user_id = EXCLUDED.user_id, code_hash = EXCLUDED.code_hash,
              salt = EXCLUDED.salt, attempts = 0, created_at = now(), expires_at = EXCLUDED.expires_at, consumed_at = NULL`,
      [c.tenantId, c.emailNormalized, c.userId, c.sessionId, hash, salt, EMAIL_OTP_TTL_SECONDS],
      'email_otp_issue_step_up',
    );
    return code;
  }

  /**
   * One check of a code from client address `ip`, counted twice before any comparison:
   *
   * 1. per account over every code (LoginThrottleService, atomic in Redis): past the limit the
   *    check is refused with 429 auth/login_throttled and Retry-After, the code not even looked
   *    at (a right code stays unused, for when the block ends); a right code takes its count back;
   * 2. per code (`check`): at most 5, then the code is dead.
   *
   * A wrong code never voids the live code, not even the one that starts the block: addresses
   * trusted for the account (`signedIn`) are still checked during it, so the owner's right code
   * may be in flight beside it (README "Wrong codes per address"). Unknown addresses are counted
   * and answered the same way. Answers the row when the code matches (not yet used: see
   * `consume`), otherwise undefined.
   */
  async attempt(target: CodeTarget, code: string, ip: string): Promise<CodeRow | undefined> {
    const { realm, account } = codeThrottleSubject(target);
    return this.throttle.judge(realm, account, ip, () => this.check(target, code), { trust: false, limits: this.limits() });
  }

  /**
   * The code matched by `attempt` signed its account in (or stepped it up) from `ip`: the address
   * is known to the account, so the account-wide limit no longer applies to it (its pair's does).
   */
  async signedIn(target: CodeTarget, ip: string): Promise<void> {
    const { realm, account } = codeThrottleSubject(target);
    await this.throttle.trustAddress(realm, account, ip);
  }

  /**
   * Counts one attempt on the live code, then compares in constant time. The increment is
   * `attempts = attempts + 1 WHERE attempts < 5 RETURNING`: row locks serialize parallel
   * attempts, so however many arrive at once, at most 5 ever reach the comparison. Answers the
   * row when the code matches, otherwise undefined.
   */
  private async check(target: CodeTarget, code: string): Promise<CodeRow | undefined> {
    const where =
      target.purpose === 'login'
        ? `tenant_id = $1 AND purpose = 'login' AND email_normalized = $2`
        : `tenant_id = $1 AND purpose = 'step_up' AND session_id = $2::uuid AND user_id = $3::uuid`;
    const params = target.purpose === 'login' ? [target.tenantId, target.emailNormalized] : [target.tenantId, target.sessionId, target.userId];
    const [row] = await this.db.query<CodeRow & { code_hash: string; salt: string }>(
      `UPDATE email_otp_codes SET attempts = attempts + 1
        WHERE ${where} AND consumed_at IS NULL AND expires_at > now() AND attempts < ${EMAIL_OTP_MAX_ATTEMPTS}
        RETURNING id, user_id, email_normalized, mode, binding_hash, oauth_params, attempts, code_hash, salt`,
      params,
      `email_otp_attempt_${target.purpose}`,
    );
    if (!row) {
      this.matches('0', code, ''); // same HMAC work when there is no live code
      return undefined;
    }
    if (!/^\d{6}$/.test(code) || !this.matches(row.salt, code, row.code_hash)) return undefined;
    const { salt: _s, ...rest } = row;
    return rest;
  }

  /**
   * Uses a matched code: of parallel correct attempts exactly one wins. The row is reused when a
   * new code is sent (consumed_at cleared), so the match is bound to its code: a request that
   * matched the earlier code cannot use the row again once a new code replaced it.
   */
  async consume(tx: Queryable, matched: Pick<CodeRow, 'id' | 'code_hash'>): Promise<boolean> {
    const { rowCount } = await tx.exec(
      `UPDATE email_otp_codes SET consumed_at = now() WHERE id = $1 AND code_hash = $2 AND consumed_at IS NULL`,
      [matched.id, matched.code_hash],
      'email_otp_consume',
    );
    return rowCount === 1;
  }
}
