/** Emails are compared case-insensitively: trimmed and lower-cased (unique per tenant). */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}
