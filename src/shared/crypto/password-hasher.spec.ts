// the module object itself (a namespace import is a copy of getters that cannot be spied on)
import argon2 = require('argon2');
import { AppConfig } from '../../config/config';
import { PasswordHasher } from './password-hasher';

const config = { ARGON2_MEMORY_KIB: 1024, ARGON2_TIME_COST: 1, ARGON2_PARALLELISM: 1, ARGON2_MAX_CONCURRENCY: 2 } as AppConfig;

describe('PasswordHasher', () => {
  afterEach(() => jest.restoreAllMocks());

  it('verifies a right password, refuses a wrong one, and the dummy is never true', async () => {
    const h = new PasswordHasher(config);
    const hash = await h.hash('correct horse');
    expect(await h.verifyOrDummy(hash, 'correct horse')).toBe(true);
    expect(await h.verifyOrDummy(hash, 'wrong')).toBe(false);
    expect(await h.verifyOrDummy(null, 'dummy-password-for-timing')).toBe(false);
  });

  it('does not keep a failed dummy hash: the next check without an account makes it again', async () => {
    const h = new PasswordHasher(config);
    const spy = jest.spyOn(argon2, 'hash').mockRejectedValueOnce(new Error('out of memory'));
    await expect(h.verifyDummy('x')).rejects.toThrow('out of memory');
    await expect(h.verifyDummy('x')).resolves.toBe(false);
    expect(spy).toHaveBeenCalledTimes(2);
  });
});
