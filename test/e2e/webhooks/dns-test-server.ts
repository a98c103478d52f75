import { createSocket, RemoteInfo, Socket } from 'dgram';
import { isIP } from 'net';

/** What the server does with a query for a name: answer these addresses, say NXDOMAIN or SERVFAIL, or stay silent. */
export type DnsRule = { addresses: string[] } | 'nxdomain' | 'servfail' | 'silent';

const TYPE_A = 1;
const TYPE_AAAA = 28;

/** The 16 bytes of an IPv6 address (full or `::`-compressed, no embedded IPv4). */
function ipv6Bytes(ip: string): Buffer {
  const [head, tail] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/**
 * A real DNS server over UDP on 127.0.0.1 for tests (RFC 1035 4.1, A and AAAA only), with a
 * hand-written encoder: each name answers by its rule; a name without one gets NXDOMAIN. A
 * `silent` name is never answered (a DNS server that hangs); a `servfail` one gets SERVFAIL (a
 * resolver that cannot answer, e.g. its upstream failing). `queries` records every question.
 */
export class DnsTestServer {
  readonly queries: { name: string; type: number; at: number }[] = [];
  private readonly rules = new Map<string, DnsRule>();
  private socket!: Socket;
  port = 0;

  async start(): Promise<this> {
    this.socket = createSocket('udp4');
    this.socket.on('message', (msg, from) => this.answer(msg, from));
    await new Promise<void>((resolve) => this.socket.bind(0, '127.0.0.1', resolve));
    this.port = this.socket.address().port;
    return this;
  }

  /** `127.0.0.1:<port>`, as WEBHOOK_DNS_SERVERS or Resolver.setServers take it. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  set(name: string, rule: DnsRule): void {
    this.rules.set(name.toLowerCase().replace(/\.$/, ''), rule);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.socket.close(() => resolve()));
  }

  private answer(msg: Buffer, from: RemoteInfo): void {
    if (msg.length < 12) return;
    // question: labels up to the zero byte, then QTYPE and QCLASS
    const labels: string[] = [];
    let i = 12;
    while (i < msg.length && msg[i] !== 0) {
      labels.push(msg.subarray(i + 1, i + 1 + msg[i]).toString('latin1'));
      i += msg[i] + 1;
    }
    const qEnd = i + 5;
    if (qEnd > msg.length) return;
    const name = labels.join('.').toLowerCase();
    const type = msg.readUInt16BE(i + 1);
    this.queries.push({ name, type, at: Date.now() });
    const rule = this.rules.get(name) ?? 'nxdomain';
    if (rule === 'silent') return;
    const records =
      rule === 'nxdomain' || rule === 'servfail'
        ? []
        : rule.addresses
            .filter((a) => (type === TYPE_A ? isIP(a) === 4 : type === TYPE_AAAA ? isIP(a) === 6 : false))
            .map((a) => (isIP(a) === 4 ? Buffer.from(a.split('.').map(Number)) : ipv6Bytes(a)));
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0); // id
    // QR, opcode 0, AA, RD copied, RA; RCODE 3 (NXDOMAIN), 2 (SERVFAIL) or 0 (an empty answer is NODATA)
    header.writeUInt16BE(0x8000 | 0x0400 | (msg.readUInt16BE(2) & 0x0100) | 0x0080 | (rule === 'nxdomain' ? 3 : rule === 'servfail' ? 2 : 0), 2);
    header.writeUInt16BE(1, 4); // QDCOUNT
    header.writeUInt16BE(records.length, 6); // ANCOUNT
    const answers = records.map((rdata) => {
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the name: pointer to the question's
      rr.writeUInt16BE(type, 2);
      rr.writeUInt16BE(1, 4); // class IN
      rr.writeUInt32BE(60, 6); // TTL
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
    this.socket.send(Buffer.concat([header, msg.subarray(12, qEnd), ...answers]), from.port, from.address);
  }
}
