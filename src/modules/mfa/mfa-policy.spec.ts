import { enrollmentState, MfaPolicySettings } from './mfa-policy';

const DAY = 86_400_000;
const now = new Date('2025-06-15T12:00:00Z');
const ago = (days: number) => new Date(now.getTime() - days * DAY);

const settings = (p: Partial<MfaPolicySettings> = {}): MfaPolicySettings => ({
  mfaPolicy: 'required',
  graceDays: 7,
  requiredSince: ago(3),
  tenantCreatedAt: ago(400),
  ...p,
});

describe('MFA policy (spec 2.8)', () => {
  it('requires nothing under the optional policy', () => {
    expect(enrollmentState(settings({ mfaPolicy: 'optional' }), ago(100), now)).toEqual({ kind: 'not_required' });
  });

  it('grants the grace from the switch to required', () => {
    expect(enrollmentState(settings(), ago(100), now)).toEqual({ kind: 'grace', deadline: new Date(ago(3).getTime() + 7 * DAY) });
    expect(enrollmentState(settings({ requiredSince: ago(7) }), ago(100), now)).toEqual({ kind: 'enforced' });
    expect(enrollmentState(settings({ requiredSince: new Date(ago(7).getTime() + 1000) }), ago(100), now).kind).toBe('grace');
  });

  it('grants users created after the switch the whole grace from their creation', () => {
    expect(enrollmentState(settings({ requiredSince: ago(20), graceDays: 3 }), ago(1), now)).toEqual({
      kind: 'grace',
      deadline: new Date(ago(1).getTime() + 3 * DAY),
    });
    expect(enrollmentState(settings({ requiredSince: ago(20), graceDays: 3 }), ago(4), now)).toEqual({ kind: 'enforced' });
  });

  it('counts a required policy without a switch time from the tenant creation', () => {
    expect(enrollmentState(settings({ requiredSince: null, tenantCreatedAt: ago(400) }), ago(100), now)).toEqual({ kind: 'enforced' });
    expect(enrollmentState(settings({ requiredSince: null, tenantCreatedAt: ago(2) }), ago(1), now).kind).toBe('grace');
  });
});
