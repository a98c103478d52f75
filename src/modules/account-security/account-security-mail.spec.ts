import { renderMail, TemplateContext } from '../../shared/mail/templates';

const ctx = (data: Record<string, unknown> = {}, secret: Record<string, unknown> = { token: 'tok', code: '012345' }): TemplateContext => ({
  tenantName: 'Acme',
  accountsUrl: 'https://accounts.example',
  data,
  secret,
});

describe('account-security mails (issue 5 item 9: text and HTML parts, tenant name)', () => {
  it('a sign-in link and a step-up link go to different flow paths', () => {
    expect(renderMail('magic_link', ctx()).text).toContain('https://accounts.example/magic-link?token=tok');
    const stepUp = renderMail('magic_link', ctx({ purpose: 'step_up', action_hint: 'delete\r\nyour account', expires_in_minutes: 15 }));
    expect(stepUp.subject).toBe('Confirm it is you on Acme');
    expect(stepUp.text).toContain('https://accounts.example/step-up/magic-link?token=tok');
    expect(stepUp.html).toContain('href="https://accounts.example/step-up/magic-link?token=tok"');
    expect(stepUp.text).toContain('requested for: delete your account');
    expect(stepUp.text).toContain('15 minutes');
  });

  it('codes: sign-in and step-up wording, the lifetime, never a link', () => {
    const signIn = renderMail('email_otp', ctx({ expires_in_minutes: 10 }));
    expect(signIn.subject).toBe('Your Acme verification code');
    expect(signIn.text).toContain('10 minutes');
    const stepUp = renderMail('email_otp', ctx({ purpose: 'step_up' }));
    expect(stepUp.subject).toBe('Your Acme confirmation code');
    for (const m of [signIn, stepUp]) {
      expect(m.text).toMatch(/^012345$/m);
      expect(m.html).toContain('012345');
      expect(m.text).not.toContain('token=');
    }
  });

  it('lifetimes read as minutes or hours', () => {
    expect(renderMail('password_reset', ctx({ expires_in_minutes: 30 })).text).toContain('expires in 30 minutes');
    expect(renderMail('email_verification', ctx({ expires_in_minutes: 1440 })).text).toContain('expires in 24 hours');
    expect(renderMail('email_verification', ctx()).text).toContain('expires soon');
    // what the worker passes: what is left when the mail is sent, to the nearest minute
    expect(renderMail('password_reset', ctx({ expires_in_minutes: 29.99 })).text).toContain('expires in 30 minutes');
    expect(renderMail('password_reset', ctx({ expires_in_minutes: 12.4 })).text).toContain('expires in 12 minutes');
    expect(renderMail('password_reset', ctx({ expires_in_minutes: 1.2 })).text).toContain('expires in 1 minute.');
    expect(renderMail('password_reset', ctx({ expires_in_minutes: 0.4 })).text).toContain('expires within a minute');
    expect(renderMail('email_verification', ctx({ expires_in_minutes: 1439.9 })).text).toContain('expires in 24 hours');
    expect(renderMail('email_verification', ctx({ expires_in_minutes: 1400 })).text).toContain('expires in 23 hours');
    expect(renderMail('dashboard_invite', ctx({ expires_in_minutes: 7 * 1440 })).text).toContain('The invitation expires in 7 days.');
    expect(renderMail('dashboard_invite', ctx()).text).not.toContain('expires');
    expect(renderMail('dashboard_invite', ctx({ expires_in_minutes: 7 * 1440 - 5 })).text).toContain('The invitation expires in 6 days.');
  });

  it('password changed: reset and change say what happened to the other sessions', () => {
    expect(renderMail('password_changed', ctx({ reason: 'reset' })).text).toContain('Every device signed in to the account was signed out');
    expect(renderMail('password_changed', ctx({ reason: 'change' })).text).toContain('Your other signed-in devices were signed out');
  });
});
