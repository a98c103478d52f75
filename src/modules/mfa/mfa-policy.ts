/** The tenant settings of spec 2.8 that decide whether a user without MFA may sign in. */
export interface MfaPolicySettings {
  mfaPolicy: 'optional' | 'required';
  graceDays: number;
  /** set when the policy switched to required (the grace starts then) */
  requiredSince: Date | null;
  tenantCreatedAt: Date;
}

export type EnrollmentState =
  | { kind: 'not_required' }
  /** login works; the token carries mfa_enrollment_required until `deadline` */
  | { kind: 'grace'; deadline: Date }
  /** login answers 403 mfa/enrollment_required with an enrollment-only token */
  | { kind: 'enforced' };

const DAY_MS = 86_400_000;

/**
 * spec 2.8: under `required`, a user without MFA gets `mfa_grace_period_days` counted from when
 * the policy became required, or from the user's creation when that is later (new users get the
 * whole grace). A required policy without a switch time counts from the tenant's creation.
 */
export function enrollmentState(s: MfaPolicySettings, userCreatedAt: Date, now = new Date()): EnrollmentState {
  if (s.mfaPolicy !== 'required') return { kind: 'not_required' };
  const since = s.requiredSince ?? s.tenantCreatedAt;
  const start = Math.max(since.getTime(), userCreatedAt.getTime());
  const deadline = new Date(start + s.graceDays * DAY_MS);
  return now.getTime() < deadline.getTime() ? { kind: 'grace', deadline } : { kind: 'enforced' };
}
