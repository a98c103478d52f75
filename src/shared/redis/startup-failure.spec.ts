import { startupFailureLine } from './outage-log';

const urls = { DATABASE_URL: 'postgres://authp:s3cret@db.internal:6543/authp', REDIS_URL: 'redis://:r3dis@cache:6379' };
const netErr = (code: string, port: number) => Object.assign(new Error(`connect ${code} 10.0.0.5:${port}`), { code, address: '10.0.0.5', port, syscall: 'connect' });

describe('startupFailureLine', () => {
  it('names PostgreSQL and its address, never the password', () => {
    const line = startupFailureLine(netErr('ECONNREFUSED', 6543), urls);
    expect(line).toBe('cannot start: PostgreSQL at db.internal:6543 (DATABASE_URL) unreachable: connect ECONNREFUSED 10.0.0.5:6543');
    expect(line).not.toContain('s3cret');
  });
  it('names Redis when its port is the one refused', () => {
    expect(startupFailureLine(netErr('ECONNREFUSED', 6379), urls)).toBe('cannot start: Redis at cache:6379 (REDIS_URL) unreachable: connect ECONNREFUSED 10.0.0.5:6379');
  });
  it('reads an AggregateError (a host name with several addresses)', () => {
    const agg = Object.assign(new AggregateError([netErr('ECONNREFUSED', 6543)], ''), { code: 'ECONNREFUSED' });
    expect(startupFailureLine(agg, urls)).toMatch(/^cannot start: PostgreSQL at db.internal:6543 \(DATABASE_URL\) unreachable: connect ECONNREFUSED/);
  });
  it('names PostgreSQL for its own refusal (a wrong password)', () => {
    const e = Object.assign(new Error('password authentication failed for user "authp"'), { severity: 'FATAL', code: '28P01' });
    expect(startupFailureLine(e, urls)).toBe('cannot start: PostgreSQL at db.internal:6543 (DATABASE_URL): password authentication failed for user "authp"');
  });
  it('does not blame PostgreSQL for an address that is not its own (HOST naming no address)', () => {
    const e = Object.assign(new Error('getaddrinfo ENOTFOUND no-such-host.invalid'), { code: 'ENOTFOUND', hostname: 'no-such-host.invalid', syscall: 'getaddrinfo' });
    expect(startupFailureLine(e, urls)).toBe('getaddrinfo ENOTFOUND no-such-host.invalid');
    const pgHost = Object.assign(new Error('getaddrinfo ENOTFOUND db.internal'), { code: 'ENOTFOUND', hostname: 'db.internal', syscall: 'getaddrinfo' });
    expect(startupFailureLine(pgHost, urls)).toBe('cannot start: PostgreSQL at db.internal:6543 (DATABASE_URL) unreachable: getaddrinfo ENOTFOUND db.internal');
  });
  it('keeps any other start-up error as its message, on one line', () => {
    expect(startupFailureLine(new Error('the database has no schema yet: apply the migrations first'), urls)).toBe('the database has no schema yet: apply the migrations first');
  });
});
