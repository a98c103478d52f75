import { addressKey } from './address-key';

describe('addressKey: one spelling per client for per-address limits', () => {
  it('keeps IPv4 addresses and unwraps IPv4-mapped IPv6', () => {
    expect(addressKey('203.0.113.7')).toBe('203.0.113.7');
    expect(addressKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressKey('::FFFF:cb00:7107')).toBe('203.0.113.7');
  });

  it('counts an IPv6 client by its /64, whatever the spelling', () => {
    const key = '2001:db8:85a3:1::/64';
    for (const a of ['2001:db8:85a3:1::1', '2001:0DB8:85A3:0001:0000:0000:0000:0001', '2001:db8:85a3:1:ffff:ffff:ffff:fffe', '2001:db8:85a3:1:0:0:0:abcd']) {
      expect(addressKey(a)).toBe(key);
    }
    expect(addressKey('2001:db8:85a3:2::1')).not.toBe(key);
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });

  it('drops a port and IPv6 brackets a proxy may have added', () => {
    for (const a of ['10.2.0.1:443', '[::ffff:10.2.0.1]', '[::ffff:10.2.0.1]:8080', ' 10.2.0.1 ']) expect(addressKey(a)).toBe('10.2.0.1');
    expect(addressKey('[2001:db8:85a3:1::1]:443')).toBe('2001:db8:85a3:1::/64');
  });

  it('counts anything that is not an address as one shared client, so other spellings of an address get no budget of their own', () => {
    for (const a of ['unknown', '', '10.2.0.1.', '010.002.000.001', '10.2.0.1:', '10.2.0.1:99999x', 'x:1', '1::2::3']) expect(addressKey(a)).toBe('invalid');
  });
});
