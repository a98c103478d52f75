import { createHmac } from 'crypto';
import { generateWebhookSecret, signWebhook, webhookHeaders } from './signature';

describe('Standard Webhooks signing', () => {
  it('matches the Standard Webhooks reference vector', () => {
    // from the standard-webhooks spec test suite
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
    const body = '{"test": 2432232314}';
    expect(signWebhook(secret, id, 1614265330, body)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('generates 32-byte secrets and signs every attempt with its own timestamp', () => {
    const secret = generateWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    const h = webhookHeaders(secret, 'msg_1', '{}', 1_700_000_000_500);
    expect(h['webhook-timestamp']).toBe('1700000000');
    const expected = createHmac('sha256', Buffer.from(secret.slice(6), 'base64')).update('msg_1.1700000000.{}').digest('base64');
    expect(h['webhook-signature']).toBe(`v1,${expected}`);
  });

  it('signs with each secret of a rotation overlap, space-separated, the current one first', () => {
    const [current, previous] = [generateWebhookSecret(), generateWebhookSecret()];
    const h = webhookHeaders([current, previous], 'msg_1', '{}', 1_700_000_000_000);
    expect(h['webhook-signature']).toBe(`${signWebhook(current, 'msg_1', 1_700_000_000, '{}')} ${signWebhook(previous, 'msg_1', 1_700_000_000, '{}')}`);
  });
});
