import { authenticator } from 'otplib';
import { randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { TenantFixture } from '../../factories/tenant.factory';

const PERIOD_MS = 30_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The code an independent RFC 6238 implementation (otplib) shows at time step `step`. */
export function codeAt(secret: string, step: number): string {
  return authenticator.clone({ epoch: step * PERIOD_MS + 1_000 }).generate(secret);
}

export const currentStep = () => Math.floor(Date.now() / PERIOD_MS);

/** Payload of a JWT (no verification: the API verifies; tests read the claims). */
export function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
}

/**
 * An authenticator app of the test: hands out codes of strictly increasing time steps within the
 * server's window (previous, current, next step), like a user who waits for the next code. A code
 * of the previous step is handed out only early in a step, so it is still valid when it arrives;
 * when the window is used up it waits for the next step.
 */
export class TotpDevice {
  private last = Number.NEGATIVE_INFINITY;
  /** the time steps handed out, in order */
  readonly used: number[] = [];
  constructor(readonly secret: string) {}

  async next(): Promise<string> {
    for (;;) {
      const now = Date.now();
      const step = Math.floor(now / PERIOD_MS);
      const into = now % PERIOD_MS;
      const lowest = into < 20_000 ? step - 1 : step;
      const pick = Math.max(this.last + 1, lowest);
      if (pick <= step + 1) {
        this.last = pick;
        this.used.push(pick);
        return codeAt(this.secret, pick);
      }
      await sleep(PERIOD_MS - into + 200);
    }
  }

  /** The step of the last code handed out. */
  get lastStep(): number {
    return this.last;
  }
}

export interface MfaUser {
  email: string;
  password: string;
  userId: string;
  accessToken: string;
  device: TotpDevice;
  recoveryCodes: string[];
}

export function mfaApi(t: TestApp, tenant: TenantFixture) {
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  const api = {
    register: async (email = uniqueEmail('mfa'), password = STRONG_PASSWORD, key = tenant.apiKey) => {
      const res = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password, consent: true }).expect(201);
      return { email, password, userId: res.body.user.id as string, accessToken: res.body.access_token as string, refreshToken: res.body.refresh_token as string };
    },
    login: (email: string, password = STRONG_PASSWORD, key = tenant.apiKey, ip = randomIp()) =>
      t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', ip).send({ email, password }),
    setup: (token: string) => t.http().post('/v1/auth/mfa/totp/setup').set(bearer(token)).set('X-Forwarded-For', randomIp()),
    verifySetup: (token: string, body: object) => t.http().post('/v1/auth/mfa/totp/verify-setup').set(bearer(token)).set('X-Forwarded-For', randomIp()).send(body),
    verify: (body: object, key = tenant.apiKey, ip = randomIp()) => t.http().post('/v1/auth/mfa/verify').set('X-API-Key', key).set('X-Forwarded-For', ip).send(body),
    disable: (token: string, body: object, ip = randomIp()) => t.http().post('/v1/auth/mfa/disable').set(bearer(token)).set('X-Forwarded-For', ip).send(body),
    regenerate: (token: string, body: object, ip = randomIp()) => t.http().post('/v1/auth/mfa/recovery-codes').set(bearer(token)).set('X-Forwarded-For', ip).send(body),
    stepUp: (token: string, body: object, ip = randomIp()) => t.http().post('/v1/auth/step-up/password').set(bearer(token)).set('X-Forwarded-For', ip).send(body),
    me: (token: string) => t.http().get('/v1/auth/me').set(bearer(token)),
    refresh: (refreshToken: string, key = tenant.apiKey) => t.http().post('/v1/auth/refresh').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ refresh_token: refreshToken }),
    /** Moves the sign-in of the token's session `seconds` back (its refreshed tokens carry that auth_time); the new auth_time. */
    backdateSignIn: async (accessToken: string, seconds: number): Promise<number> => {
      await t.db.query(
        `UPDATE user_sessions SET created_at = created_at - make_interval(secs => $2), authenticated_at = authenticated_at - make_interval(secs => $2) WHERE id = $1`,
        [claimsOf(accessToken).sid, seconds],
      );
      return (claimsOf(accessToken).auth_time as number) - seconds;
    },

    /** Registers a user and enables TOTP (one code of its device used). */
    enrolledUser: async (): Promise<MfaUser> => {
      const u = await api.register();
      const setup = await api.setup(u.accessToken).expect(200);
      const device = new TotpDevice(setup.body.secret);
      const done = await api.verifySetup(u.accessToken, { code: await device.next() }).expect(200);
      return { ...u, device, recoveryCodes: done.body.recovery_codes };
    },

    /** Password step of an MFA user: the challenge token. */
    challenge: async (email: string, password = STRONG_PASSWORD, key = tenant.apiKey): Promise<string> => {
      const res = await api.login(email, password, key).expect(200);
      expect(res.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });
      return res.body.mfa_challenge_token;
    },

    /** Full MFA sign-in (password, then the next TOTP code): the token response. */
    signIn: async (u: MfaUser) => {
      const token = await api.challenge(u.email, u.password);
      const res = await api.verify({ mfa_challenge_token: token, code: await u.device.next() }).expect(200);
      return res.body as { access_token: string; refresh_token: string; expires_in: number; token_type: string; user: { id: string } };
    },

    /** A step-up token (POST /v1/auth/step-up/password). */
    steppedUp: async (token: string, password = STRONG_PASSWORD): Promise<string> => {
      const res = await api.stepUp(token, { password }).expect(200);
      return res.body.access_token;
    },
  };
  return api;
}
