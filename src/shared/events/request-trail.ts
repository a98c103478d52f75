import { Injectable } from '@nestjs/common';
import { ClientHasher } from '../crypto/client-hash';
import { EnvelopeCipher } from '../crypto/envelope-cipher';
import { randomToken } from '../crypto/tokens';
import { Queryable } from '../db/db.service';
import { EventsService } from './events.service';

/**
 * The audit of a mail request for an address without a (suitable) account. It also does the
 * work a mail costs (encrypting its secret, one more write in the transaction), so the answer
 * for an unknown address takes about as long as for a known one (OWASP Forgot Password: no
 * enumeration through timing). Tenants see these attempts in their audit log as keyed hash
 * prefixes (ClientHasher: HMAC under a server secret), since a plain SHA-256 of an address is
 * reversed by hashing candidate addresses.
 */
@Injectable()
export class RequestTrail {
  constructor(
    private readonly events: EventsService,
    private readonly cipher: EnvelopeCipher,
    private readonly hasher: ClientHasher,
  ) {}

  async nothingSent(tx: Queryable, tenantId: string | null, type: string, emailNormalized: string, ip: string): Promise<void> {
    this.cipher.encrypt(JSON.stringify({ token: randomToken() }));
    await this.events.audit(tx, {
      tenantId,
      type,
      actorType: 'anonymous',
      metadata: { email_hash_prefix: this.hasher.prefix(emailNormalized), ip_hash_prefix: this.hasher.prefix(ip), mail_sent: false },
    });
  }
}
