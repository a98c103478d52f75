import * as fs from 'fs';
import * as path from 'path';
import { getMetadataStorage, validate } from 'class-validator';
import { ChangePasswordRequestDto, ResetPasswordRequestDto } from './account-security/password/password.request.dto';
import { RegisterRequestDto } from './users/register/register.request.dto';
import { LoginRequestDto } from './users/login/login.request.dto';
import { AcceptInviteRequestDto, DashboardLoginRequestDto, DashboardReauthRequestDto } from './dashboard-auth/dashboard-auth.dto';
import { DashboardResetPasswordRequestDto } from './dashboard-auth/password/dashboard-password.dto';
import { SignupRequestDto } from './tenants/signup/signup.request.dto';
import { MfaDisableRequestDto } from './mfa/disable-mfa/disable-mfa.request.dto';
import { MfaRegenerateCodesRequestDto } from './mfa/regenerate-recovery-codes/regenerate-recovery-codes.request.dto';
import { StepUpPasswordRequestDto } from './mfa/step-up/step-up-password.request.dto';

type Kind = 'new' | 'current';
/** every password field of a request DTO: a password being set, or one checked against the stored hash */
const FIELDS: [dto: new () => object, field: string, kind: Kind, min: number, max?: number][] = [
  [RegisterRequestDto, 'password', 'new', 12, 128],
  [SignupRequestDto, 'password', 'new', 12, 128],
  [ResetPasswordRequestDto, 'password', 'new', 12, 128],
  [ChangePasswordRequestDto, 'new_password', 'new', 12, 128],
  [DashboardResetPasswordRequestDto, 'password', 'new', 12, 128],
  [ChangePasswordRequestDto, 'current_password', 'current', 1],
  [LoginRequestDto, 'password', 'current', 12, 128],
  [DashboardLoginRequestDto, 'password', 'current', 8, 128],
  [DashboardReauthRequestDto, 'password', 'current', 8, 128],
  [AcceptInviteRequestDto, 'password', 'current', 8, 128],
  [MfaDisableRequestDto, 'password', 'current', 1, 256],
  [MfaRegenerateCodesRequestDto, 'password', 'current', 1, 256],
  [StepUpPasswordRequestDto, 'password', 'current', 1, 256],
];

const E_ACUTE_NFD = 'e\u0301'; // two code points, one after NFKC
const LIGATURE = '\ufdfa'; // one code point, 18 after NFKC

async function fieldErrors(dto: new () => object, field: string, value: string): Promise<string[]> {
  const errors = await validate(Object.assign(new dto(), { [field]: value }));
  return errors.filter((e) => e.property === field).flatMap((e) => Object.keys(e.constraints ?? {}));
}

function dtoFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? dtoFiles(path.join(dir, e.name)) : /\.dto\.ts$/.test(e.name) ? [path.join(dir, e.name)] : []));
}

describe('password fields of request DTOs: lengths counted on the NFKC form (what is hashed)', () => {
  it('the table names every password field of every request DTO', () => {
    for (const file of dtoFiles(__dirname)) require(file);
    const all = (getMetadataStorage() as unknown as { validationMetadatas: Map<unknown, { propertyName: string }[]> }).validationMetadatas;
    const found = new Set<string>();
    for (const [target, metas] of all)
      for (const m of metas) if (/password/i.test(m.propertyName) && typeof target === 'function' && target.name !== 'EnvSchema') found.add(`${target.name}.${m.propertyName}`);
    expect([...found].sort()).toEqual(FIELDS.map(([dto, field]) => `${dto.name}.${field}`).sort());
  });

  it.each(FIELDS.map(([dto, field, kind, min, max]) => [`${dto.name}.${field}`, dto, field, kind, min, max] as const))('%s', async (_name, dto, field, kind, min, max) => {
    // the bounds themselves, in plain ASCII
    expect(await fieldErrors(dto, field, 'p'.repeat(min))).toEqual([]);
    if (min > 1) expect(await fieldErrors(dto, field, 'p'.repeat(min - 1))).toEqual(['isLength']);
    if (max !== undefined) {
      expect(await fieldErrors(dto, field, 'p'.repeat(max))).toEqual([]);
      expect(await fieldErrors(dto, field, 'p'.repeat(max + 1))).toEqual(['isLength']);
      // one more code point than max as typed, max after NFKC: accepted
      expect(await fieldErrors(dto, field, E_ACUTE_NFD + 'p'.repeat(max - 1))).toEqual([]);
    }
    // min code points after NFKC, more as typed: accepted
    expect(await fieldErrors(dto, field, E_ACUTE_NFD.repeat(min))).toEqual([]);
    // at least min code points as typed, fewer after NFKC; at most max as typed, more after NFKC
    const shortened = E_ACUTE_NFD.repeat(Math.ceil(min / 2));
    const lengthened = max === undefined ? undefined : LIGATURE.repeat(Math.max(min, Math.ceil(max / 18) + 1));
    // a password being set: refused (what would be hashed is out of the bounds); one checked against a
    // stored hash: not refused (the form as typed is within the bounds, as passwords set before were)
    const refusedWhenSet = kind === 'new' ? ['isLength'] : [];
    if (min > 1) expect(await fieldErrors(dto, field, shortened)).toEqual(refusedWhenSet);
    if (lengthened !== undefined) expect(await fieldErrors(dto, field, lengthened)).toEqual(refusedWhenSet);
  });
});
