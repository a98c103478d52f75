import { safeEqual, sha256Hex } from '../../shared/crypto/tokens';
import { AppError } from '../../shared/errors/app-error';

/** What is stored of a resume_binding given at request time (its SHA-256), or null. */
export function bindingHash(binding: string | undefined | null): string | null {
  return binding ? sha256Hex(binding) : null;
}

/**
 * Issue 5 item 3: a link or code requested with a resume_binding completes only where the same
 * value is presented (the browser that asked), compared in constant time.
 */
export function assertBinding(stored: string | null, presented: string | undefined): void {
  if (!stored) return;
  if (!presented || !safeEqual(sha256Hex(presented), stored)) {
    throw new AppError('auth/resume_binding_mismatch', 'Open the link (or enter the code) in the browser that asked for it', {
      errors: [{ field: 'resume_binding', message: 'does not match the value of the request' }],
    });
  }
}
