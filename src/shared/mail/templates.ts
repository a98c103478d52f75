import type { MailTemplate } from './mail.service';

/** What a template renders from: the outbox payload's `data`, the decrypted secret, the tenant. */
export interface TemplateContext {
  tenantName: string;
  /** ACCOUNTS_URL: links are `${accountsUrl}/<flow path>?token=<token>` */
  accountsUrl: string;
  data: Record<string, unknown>;
  secret: Record<string, unknown>;
}

export interface RenderedMail {
  subject: string;
  text: string;
  html: string;
}

/** A template's content; rendered to text and (escaped) HTML by `renderMail`. */
interface MailContent {
  subject: string;
  paragraphs: string[];
  action?: { label: string; url: string };
  /** a one-time code shown on its own line */
  code?: string;
  /** the last, smaller paragraph (why you got this email) */
  footer: string;
}

/** Thrown for a mail that can never be rendered (unknown template, missing token): not retried. */
export class MailTemplateError extends Error {}

const str = (v: unknown, fallback = ''): string => (typeof v === 'string' && v.trim() ? v.trim() : fallback);

function secretToken(c: TemplateContext): string {
  const token = str(c.secret.token);
  if (!token) throw new MailTemplateError('template needs secret.token');
  return token;
}

/** `${ACCOUNTS_URL}/<path>?token=<token>` */
export function flowLink(accountsUrl: string, path: string, token: string): string {
  return `${accountsUrl.replace(/\/+$/, '')}${path}?token=${encodeURIComponent(token)}`;
}

const IGNORE = 'If you did not request this, you can ignore this email.';

/**
 * `in N minutes` (hours, days) from data.expires_in_minutes, `soon` when absent. The worker sets it
 * to what is left when the mail is sent (a fraction): to the nearest minute (a mail sent at once
 * states its whole lifetime), hours and days rounded down from there.
 */
function expiresIn(c: TemplateContext): string {
  const exact = Number(c.data.expires_in_minutes);
  if (!Number.isFinite(exact) || exact <= 0) return 'soon';
  const m = Math.round(exact);
  const unit = (n: number, one: string) => `in ${n} ${one}${n === 1 ? '' : 's'}`;
  if (m >= 2 * 1440) return unit(Math.floor(m / 1440), 'day');
  if (m >= 120) return unit(Math.floor(m / 60), 'hour');
  return m >= 1 ? unit(m, 'minute') : 'within a minute';
}

/** ` (requested for: <action hint>)` from data.action_hint, on one line, or ''. */
function hint(c: TemplateContext): string {
  // 80 characters (code points, as the request's limit counts them): never half of a surrogate pair
  const h = Array.from(str(c.data.action_hint).replace(/[\r\n\t]+/g, ' ')).slice(0, 80).join('');
  return h ? ` (requested for: ${h})` : '';
}

const TEMPLATES: Record<MailTemplate, (c: TemplateContext) => MailContent> = {
  dashboard_invite: (c) => {
    const inviter = str(c.data.inviter_email, 'A team member');
    const role = str(c.data.role, 'member');
    return {
      subject: `You are invited to join ${c.tenantName}`,
      // invitations written before they stated their lifetime say nothing of it
      paragraphs: [`${inviter} invited you to join ${c.tenantName} as ${role === 'owner' ? 'an owner' : 'a member'}.${c.data.expires_in_minutes == null ? '' : ` The invitation expires ${expiresIn(c)}.`}`],
      action: { label: 'Accept the invitation', url: flowLink(c.accountsUrl, '/dashboard/invites/accept', secretToken(c)) },
      footer: 'If you did not expect this invitation, you can ignore this email.',
    };
  },
  email_verification: (c) => ({
    subject: `Verify your email address for ${c.tenantName}`,
    paragraphs: [`Confirm that this address belongs to you to finish setting up your ${c.tenantName} account. The link expires ${expiresIn(c)}.`],
    action: { label: 'Verify email address', url: flowLink(c.accountsUrl, '/verify-email', secretToken(c)) },
    // the link cannot tell the mailbox's owner from whoever registered the address: someone who
    // did not sign up must not confirm an account another person holds the password of
    footer: `If you did not create this account, do not use the link: someone else signed up with your address. Ignore this email, or take the account over by resetting its password.`,
  }),
  password_reset: (c) => ({
    subject: `Reset your ${c.tenantName} password`,
    paragraphs: [`Someone asked to reset the password of your ${c.tenantName} account. The link works once and expires ${expiresIn(c)}.`],
    action: { label: 'Choose a new password', url: flowLink(c.accountsUrl, '/reset-password', secretToken(c)) },
    footer: `${IGNORE} Your password stays unchanged.`,
  }),
  password_changed: (c) => ({
    subject: `Your ${c.tenantName} password was changed`,
    paragraphs: [
      c.data.reason === 'reset'
        ? `The password of your ${c.tenantName} account was just reset with a link sent to this address. Every device signed in to the account was signed out.`
        : `The password of your ${c.tenantName} account was just changed. Your other signed-in devices were signed out.`,
    ],
    footer: 'If you did not change it, reset your password right away and contact the support of the service.',
  }),
  // a tenant administrator's dashboard account (no tenant: the account may belong to several)
  dashboard_password_reset: (c) => ({
    subject: 'Reset your dashboard password',
    paragraphs: [`Use this link to choose a new password for your dashboard account. It works once and expires ${expiresIn(c)}. Every device signed in to the dashboard with this account will be signed out.`],
    action: { label: 'Choose a new password', url: flowLink(c.accountsUrl, '/dashboard/reset-password', secretToken(c)) },
    footer: `${IGNORE} Your password stays unchanged.`,
  }),
  dashboard_password_changed: () => ({
    subject: 'Your dashboard password was reset',
    paragraphs: ['The password of your dashboard account was just reset with a link sent to this address. Every device signed in to the dashboard with this account was signed out.'],
    footer: 'If you did not reset it, reset your password right away and tell the other owners of your tenants.',
  }),
  // data.change: what happened to the account's second factor (see src/modules/mfa/mfa-notice.ts)
  mfa_changed: (c) => {
    const change = str(c.data.change);
    const what: Record<string, { subject: string; text: string }> = {
      enabled: {
        subject: `Two-step verification was turned on for your ${c.tenantName} account`,
        text: `Two-step verification was just turned on for your ${c.tenantName} account: signing in now also asks for a code from the authenticator app that was set up.`,
      },
      disabled: {
        subject: `Two-step verification was turned off for your ${c.tenantName} account`,
        text: `Two-step verification was just turned off for your ${c.tenantName} account: signing in no longer asks for a code from an authenticator app.`,
      },
      recovery_codes_regenerated: {
        subject: `New recovery codes for your ${c.tenantName} account`,
        text: `New two-step verification recovery codes were just created for your ${c.tenantName} account. The earlier codes no longer work.`,
      },
    };
    const m = what[change];
    if (!m) throw new MailTemplateError(`mfa_changed needs data.change (one of ${Object.keys(what).join(', ')})`);
    return { subject: m.subject, paragraphs: [m.text], footer: 'If you did not do this, reset your password right away and contact the support of the service.' };
  },
  // data.first_factor: 'password' or 'email' (a magic link or email code); see src/modules/mfa/mfa-notice.ts
  mfa_sign_in_failed: (c) => {
    const password = str(c.data.first_factor) !== 'email';
    return {
      subject: `A sign-in to your ${c.tenantName} account was stopped at two-step verification`,
      paragraphs: [
        password
          ? `Someone signed in to your ${c.tenantName} account with the right password, then gave a wrong two-step verification code, so they were not let in.`
          : `Someone signed in to your ${c.tenantName} account with a link or code sent to this address, then gave a wrong two-step verification code, so they were not let in.`,
        password
          ? 'If this was not you, your password is known to someone else: change it now (changing it also ends sign-ins waiting for a code).'
          : 'If this was not you, someone can read this mailbox: secure your email account and change its password now.',
      ],
      footer: 'Repeated wrong codes send this email once in a while, not for each one, so an attack does not flood your inbox.',
    };
  },
  // data.purpose 'step_up': the link confirms a sensitive action of a signed-in session
  magic_link: (c) =>
    c.data.purpose === 'step_up'
      ? {
          subject: `Confirm it is you on ${c.tenantName}`,
          paragraphs: [
            `Use this link to confirm a sensitive action on your ${c.tenantName} account${hint(c)}. It works once, only in the session that asked, and expires ${expiresIn(c)}.`,
          ],
          action: { label: 'Confirm it is me', url: flowLink(c.accountsUrl, '/step-up/magic-link', secretToken(c)) },
          footer: `${IGNORE} Nothing changes without it.`,
        }
      : {
          subject: `Your sign-in link for ${c.tenantName}`,
          paragraphs: [`Use this link to sign in to ${c.tenantName}. It works once and expires ${expiresIn(c)}.`],
          action: { label: `Sign in to ${c.tenantName}`, url: flowLink(c.accountsUrl, '/magic-link', secretToken(c)) },
          footer: IGNORE,
        },
  email_otp: (c) => {
    const code = str(c.secret.code);
    if (!/^\d{6}$/.test(code)) throw new MailTemplateError('template email_otp needs a 6-digit secret.code');
    const stepUp = c.data.purpose === 'step_up';
    return {
      subject: stepUp ? `Your ${c.tenantName} confirmation code` : `Your ${c.tenantName} verification code`,
      paragraphs: [
        stepUp
          ? `Enter this code to confirm a sensitive action on your ${c.tenantName} account${hint(c)}. It expires ${expiresIn(c)}; do not share it with anyone.`
          : `Enter this code to continue with ${c.tenantName}. It expires ${expiresIn(c)}; do not share it with anyone.`,
      ],
      code,
      footer: IGNORE,
    };
  },
  agent_revoked: (c) => {
    const name = str(c.data.agent_name, 'An AI agent');
    const id = str(c.data.agent_id);
    return {
      // spec 3.2: mailed to every owner of the tenant whose admin revoked the agent
      subject: `The agent ${name} was revoked in ${c.tenantName}`,
      paragraphs: [
        `A tenant administrator of ${c.tenantName} revoked the AI agent ${name}${id ? ` (${id})` : ''}. It can no longer exchange tokens for any user, and the tokens it held no longer work.`,
      ],
      footer: `You receive this email as an owner of ${c.tenantName}. If you did not expect this, review the agents and the audit log in the dashboard.`,
    };
  },
  webhook_disabled: (c) => {
    const url = str(c.data.url, 'a webhook endpoint');
    return {
      subject: `A webhook endpoint of ${c.tenantName} was disabled`,
      paragraphs: [`Deliveries to ${url} kept failing, so the endpoint was disabled. Fix the endpoint, then enable it again in the dashboard. Events that happen while it is disabled are not sent to it.`],
      footer: `You receive this email as an owner of ${c.tenantName}.`,
    };
  },
};

export function isMailTemplate(name: unknown): name is MailTemplate {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(TEMPLATES, name);
}

/** Renders a template to a subject, a text part and an HTML part (interpolated values escaped). */
export function renderMail(template: MailTemplate, ctx: TemplateContext): RenderedMail {
  if (!isMailTemplate(template)) throw new MailTemplateError(`unknown mail template ${String(template)}`);
  const m = TEMPLATES[template](ctx);
  const subject = m.subject.replace(/[\r\n]+/g, ' ');
  const text = [
    ...m.paragraphs,
    ...(m.code ? [m.code] : []),
    ...(m.action ? [`${m.action.label}:\n${m.action.url}`] : []),
    m.footer,
  ].join('\n\n');
  const html = [
    '<!doctype html>',
    '<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"></head>',
    '<body style="font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:15px;line-height:1.5;color:#1a1a1a">',
    ...m.paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`),
    ...(m.code ? [`<p style="font-size:28px;font-weight:600;letter-spacing:6px">${escapeHtml(m.code)}</p>`] : []),
    ...(m.action
      ? [
          `<p><a href="${escapeHtml(m.action.url)}" style="display:inline-block;padding:10px 18px;background:#1a1a1a;color:#fff;text-decoration:none;border-radius:6px">${escapeHtml(m.action.label)}</a></p>`,
          `<p style="font-size:13px;color:#555">Or open this link: ${escapeHtml(m.action.url)}</p>`,
        ]
      : []),
    `<p style="font-size:13px;color:#555">${escapeHtml(m.footer)}</p>`,
    '</body></html>',
  ].join('\n');
  return { subject, text, html };
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch] as string);
}
