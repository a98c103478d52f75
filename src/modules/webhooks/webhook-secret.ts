import type { EnvelopeCipher } from '../../shared/crypto/envelope-cipher';

/** AAD of an endpoint's encrypted secret: a ciphertext copied onto another endpoint fails to open. */
export function secretAad(endpointId: string): string {
  return `webhook_endpoint:${endpointId}`;
}

/** Opens the signing secret of an endpoint (worker only, right before signing). */
export function openWebhookSecret(cipher: EnvelopeCipher, endpointId: string, secretEnc: string): string {
  return cipher.decryptString(secretEnc, secretAad(endpointId));
}
