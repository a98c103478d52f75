import { MailTemplate } from './mail.service';
import { escapeHtml, flowLink, MailTemplateError, renderMail, TemplateContext } from './templates';
import { lifetimeLeftMinutes } from './mail.processor';

const ctx = (over: Partial<TemplateContext> = {}): TemplateContext => ({
  tenantName: 'Acme',
  accountsUrl: 'https://accounts.example/',
  data: {},
  secret: { token: 'tok_123', code: '123456' },
  ...over,
});

describe('mail templates', () => {
  it.each<[MailTemplate, string]>([
    ['dashboard_invite', '/dashboard/invites/accept'],
    ['email_verification', '/verify-email'],
    ['password_reset', '/reset-password'],
    ['magic_link', '/magic-link'],
  ])('%s links to ACCOUNTS_URL%s?token=<token> in both parts', (template, path) => {
    const m = renderMail(template, ctx());
    const link = `https://accounts.example${path}?token=tok_123`;
    expect(m.subject).toContain('Acme');
    expect(m.text).toContain(link);
    expect(m.html).toContain(`href="${link}"`);
  });

  it.each<MailTemplate>(['password_changed', 'email_otp', 'agent_revoked', 'webhook_disabled'])('%s has no link', (template) => {
    const m = renderMail(template, ctx({ data: { agent_name: 'Bot', agent_id: 'a1', url: 'https://hooks.example/x' } }));
    expect(m.text).not.toContain('token=');
    expect(m.subject).toContain(template === 'agent_revoked' ? 'Bot' : 'Acme');
  });

  it('agent_revoked speaks to a tenant owner (spec 3.2), not to an end user', () => {
    const m = renderMail('agent_revoked', ctx({ data: { agent_name: 'Bot', agent_id: 'a1' } }));
    expect(m.subject).toBe('The agent Bot was revoked in Acme');
    expect(m.text).toContain('as an owner of Acme');
    expect(m.text).not.toContain('your Acme account');
  });

  it.each(['enabled', 'disabled', 'recovery_codes_regenerated'])('mfa_changed (%s) tells what changed, with no link and no secret', (change) => {
    const m = renderMail('mfa_changed', ctx({ data: { change } }));
    expect(m.subject).toContain('Acme');
    expect(m.text).toContain({ enabled: 'turned on', disabled: 'turned off', recovery_codes_regenerated: 'earlier codes no longer work' }[change]);
    expect(m.text).toContain('reset your password');
    expect(m.text).not.toContain('token=');
    expect(m.text).not.toContain('123456');
  });

  it.each([
    ['password', 'change it now'],
    ['email', 'secure your email account'],
  ])('mfa_sign_in_failed after a %s first factor says what is known to the attacker, with no link', (first_factor, advice) => {
    const m = renderMail('mfa_sign_in_failed', ctx({ data: { first_factor } }));
    expect(m.subject).toContain('Acme');
    expect(m.text).toContain(advice);
    // no link to follow: a notice someone could imitate must not teach users to click one
    expect(m.text).not.toMatch(/https?:\/\//);
    expect(m.html).not.toContain('href=');
  });

  it("a step-up mail's action hint is cut at 80 characters (code points, as the request counts them), never inside a surrogate pair", () => {
    const action_hint = `a${'\u{1F600}'.repeat(90)}`;
    const m = renderMail('email_otp', ctx({ data: { purpose: 'step_up', action_hint } }));
    const shown = `a${'\u{1F600}'.repeat(79)}`;
    expect(m.text).toContain(`(requested for: ${shown})`);
    expect(m.html).toContain(`(requested for: ${shown})`);
    expect(m.text).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
  });

  it('mfa_changed without a known change cannot render', () => {
    expect(() => renderMail('mfa_changed', ctx({ data: { change: 'other' } }))).toThrow(MailTemplateError);
    expect(() => renderMail('mfa_changed', ctx())).toThrow(MailTemplateError);
  });

  it('email_otp shows the 6-digit code and refuses anything else', () => {
    expect(renderMail('email_otp', ctx()).text).toContain('123456');
    expect(() => renderMail('email_otp', ctx({ secret: { code: '12345' } }))).toThrow(MailTemplateError);
  });

  it('a link template without a token cannot render', () => {
    expect(() => renderMail('password_reset', ctx({ secret: {} }))).toThrow(MailTemplateError);
  });

  it('escapes interpolated values in the HTML part only', () => {
    const m = renderMail('dashboard_invite', ctx({ tenantName: '<script>x</script>', data: { inviter_email: '"a"@b.c' } }));
    expect(m.html).not.toContain('<script>');
    expect(m.html).toContain('&lt;script&gt;x&lt;/script&gt;');
    expect(m.html).toContain('&quot;a&quot;@b.c');
    expect(m.text).toContain('<script>x</script>');
  });

  it('keeps the subject on one line and encodes the token in the link', () => {
    expect(renderMail('magic_link', ctx({ tenantName: 'A\r\nBcc: x@y.z' })).subject).not.toMatch(/[\r\n]/);
    expect(flowLink('https://a.example', '/magic-link', 'a+b/c')).toBe('https://a.example/magic-link?token=a%2Bb%2Fc');
    expect(escapeHtml(`&<>"'`)).toBe('&amp;&lt;&gt;&quot;&#39;');
  });
});

describe('lifetimeLeftMinutes: what is left of a mail secret when the worker sends it', () => {
  const created = '2026-01-01T00:00:00.000Z';
  const at = (minutes: number) => Date.parse(created) + minutes * 60_000;
  it('counts from the outbox row', () => {
    expect(lifetimeLeftMinutes(15, created, at(0))).toBe(15);
    expect(lifetimeLeftMinutes(15, created, at(10))).toBe(5);
    expect(lifetimeLeftMinutes(15, created, at(15))).toBe(0);
    expect(lifetimeLeftMinutes(15, created, at(16))).toBeLessThan(0);
  });
  it('no stated lifetime: undefined (the mail goes out as it is)', () => {
    for (const v of [undefined, null, 0, -1, 'x', Number.NaN]) expect(lifetimeLeftMinutes(v, created, at(100))).toBeUndefined();
    expect(lifetimeLeftMinutes(15, 'not a date', at(100))).toBeUndefined();
  });
});
