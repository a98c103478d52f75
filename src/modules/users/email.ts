/**
 * Emails are compared by one spelling (unique per tenant, and per dashboard): trimmed, Unicode NFC
 * (so "josé" typed with a precomposed é or with e + combining accent is one address), then
 * lower-cased (NFC again: a few lower-case mappings leave a decomposed sequence).
 */
export function normalizeEmail(email: string): string {
  return email.trim().normalize('NFC').toLowerCase().normalize('NFC');
}
