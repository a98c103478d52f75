import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomBytes } from 'crypto';
import * as argon2 from 'argon2';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { AppError } from '../errors/app-error';
import { outageLog } from '../redis/outage-log';

/**
 * Counting semaphore: argon2 work is capped at the core count so requests queue, not thrash; past
 * `maxWaiting` queued, a new one is refused at once (`onFull`'s error) rather than queued.
 */
class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(
    private readonly max: number,
    private readonly maxWaiting: number,
    private readonly onFull: () => Error,
  ) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) {
      if (this.waiting.length >= this.maxWaiting) throw this.onFull();
      await new Promise<void>((r) => this.waiting.push(r));
    }
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

/**
 * Salt length of hashes made of the normalized form (argon2's default is 16 bytes): the mark that
 * tells them from hashes made before passwords were normalized, which alone get the second,
 * as-typed comparison (see verify), until their next sign-in re-hashes them.
 */
const NORMALIZED_SALT_BYTES = 32;

/** Whether a stored hash was made of the normalized form (its salt is NORMALIZED_SALT_BYTES long). */
export function isNormalizedHash(hash: string): boolean {
  const salt = hash.split('$')[4];
  return salt !== undefined && Buffer.from(salt, 'base64').length === NORMALIZED_SALT_BYTES;
}

/**
 * The form a password is hashed and compared in: Unicode NFKC (NIST SP 800-63B 5.1.1.2), so the
 * same password typed on devices that compose characters differently (é as one code point or as
 * e + a combining accent; fullwidth forms) is one password.
 */
export function normalizePassword(password: string): string {
  return password.normalize('NFKC');
}

/** argon2id password hashing with the OWASP parameters (lower cost only under NODE_ENV=test). */
@Injectable()
export class PasswordHasher {
  private readonly options: argon2.HashOptions & { raw: false };
  private readonly sem: Semaphore;
  private dummy?: Promise<string>;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.options = {
      type: argon2.argon2id,
      memoryCost: config.ARGON2_MEMORY_KIB,
      timeCost: config.ARGON2_TIME_COST,
      parallelism: config.ARGON2_PARALLELISM,
      raw: false,
    };
    const shedding = outageLog(new Logger(PasswordHasher.name), 'password checks refused: the hashing queue is full (ARGON2_MAX_WAITING)');
    this.sem = new Semaphore(config.ARGON2_MAX_CONCURRENCY, config.ARGON2_MAX_WAITING, () => {
      const e = new AppError('server/unavailable', 'Too many password checks are waiting; retry shortly', { headers: { 'Retry-After': '1' }, logged: true });
      shedding(e);
      return e;
    });
  }

  /** Hashes the password in its normalized form (normalizePassword), marked as such (NORMALIZED_SALT_BYTES). */
  hash(password: string): Promise<string> {
    return this.sem.run(() => argon2.hash(normalizePassword(password), { ...this.options, salt: randomBytes(NORMALIZED_SALT_BYTES) }));
  }

  /**
   * Whether the password matches: its normalized form; and, only for a hash made before passwords
   * were normalized (isNormalizedHash false) and a password whose form changes, the form as typed
   * (the sign-in that matches re-hashes it, see rehashIfNeeded). So a guess costs one hash, and
   * two only against an account whose hash predates normalization and has not signed in since.
   */
  async verify(hash: string, password: string): Promise<boolean> {
    const normalized = normalizePassword(password);
    if (await this.verifyOne(hash, normalized)) return true;
    if (normalized === password || isNormalizedHash(hash)) return false;
    return this.verifyOne(hash, password);
  }

  private verifyOne(hash: string, password: string): Promise<boolean> {
    return this.sem.run(async () => {
      try {
        return await argon2.verify(hash, password);
      } catch {
        return false;
      }
    });
  }

  /**
   * A new hash with the configured parameters when `hash` was made with others (an older
   * configuration) or before passwords were normalized: sign-in handlers store it after a
   * successful verify, so stored hashes follow without a reset. Undefined when the hash is current.
   */
  async rehashIfNeeded(hash: string, password: string): Promise<string | undefined> {
    let stale: boolean;
    try {
      stale = argon2.needsRehash(hash, { memoryCost: this.options.memoryCost, timeCost: this.options.timeCost, parallelism: this.options.parallelism });
    } catch {
      return undefined;
    }
    // made before passwords were normalized: the new hash is of the normalized form, marked
    return stale || !isNormalizedHash(hash) ? this.hash(password) : undefined;
  }

  /**
   * Verifies against the account's hash, or (no account, or an account without a password) against
   * the fixed one, so both cost the same time and only the first can be true.
   */
  verifyOrDummy(hash: string | null | undefined, password: string): Promise<boolean> {
    return hash ? this.verify(hash, password) : this.verifyDummy(password);
  }

  /** Verifies against a fixed hash so an unknown account costs the same time as a wrong password. */
  async verifyDummy(password: string): Promise<false> {
    // a failed hash (out of memory, say) is not kept: the next check makes it again
    this.dummy ??= argon2.hash('dummy-password-for-timing', { ...this.options, salt: randomBytes(NORMALIZED_SALT_BYTES) }).catch((e: unknown) => {
      this.dummy = undefined;
      throw e;
    });
    await this.verify(await this.dummy, password);
    return false;
  }
}
