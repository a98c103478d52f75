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

  const NFC = 'correct h\u00f6rse battery';
  const NFD = 'correct ho\u0308rse battery';
  const FULLWIDTH = '\uff43orrect h\u00f6rse battery';

  it('one password whatever the Unicode spelling typed (NFKC): composed, decomposed and fullwidth forms all match', async () => {
    const h = new PasswordHasher(config);
    const hash = await h.hash(NFD);
    for (const typed of [NFC, NFD, FULLWIDTH]) expect([typed, await h.verify(hash, typed)]).toEqual([typed, true]);
    expect(await h.verify(hash, 'correct horse battery')).toBe(false);
    expect(await h.rehashIfNeeded(hash, NFD)).toBeUndefined();
  });

  it('a hash made of the typed form before normalization still matches it, and the sign-in re-hashes it normalized', async () => {
    const h = new PasswordHasher(config);
    const legacy = await argon2.hash(NFD, { type: argon2.argon2id, memoryCost: 1024, timeCost: 1, parallelism: 1 });
    expect(await h.verify(legacy, NFC)).toBe(false); // never matched any other spelling
    expect(await h.verify(legacy, NFD)).toBe(true);
    const upgraded = await h.rehashIfNeeded(legacy, NFD);
    expect(upgraded).toEqual(expect.any(String));
    expect(await h.verify(upgraded!, NFC)).toBe(true);
    expect(await h.rehashIfNeeded(upgraded!, NFC)).toBeUndefined();
  });

  it('a guess costs one hash against a hash made of the normalized form, whatever its spelling; two only against a hash that predates normalization', async () => {
    const h = new PasswordHasher(config);
    const current = await h.hash(NFC);
    const legacy = await argon2.hash(NFD, { type: argon2.argon2id, memoryCost: 1024, timeCost: 1, parallelism: 1 });
    const spy = jest.spyOn(argon2, 'verify');
    await h.verify(current, 'wro\u0308ng decomposed');
    expect(spy).toHaveBeenCalledTimes(1);
    spy.mockClear();
    await h.verify(legacy, 'wro\u0308ng decomposed');
    expect(spy).toHaveBeenCalledTimes(2);
  });

  it('a wrong password costs the same argon2 work with or without an account, whatever its spelling', async () => {
    const h = new PasswordHasher(config);
    const hash = await h.hash(NFC);
    await h.verifyDummy('warm up');
    const spy = jest.spyOn(argon2, 'verify');
    for (const wrong of ['plain ascii wrong', 'wro\u0308ng decomposed']) {
      spy.mockClear();
      await h.verify(hash, wrong);
      const withAccount = spy.mock.calls.length;
      spy.mockClear();
      await h.verifyDummy(wrong);
      expect([wrong, spy.mock.calls.length]).toEqual([wrong, withAccount]);
    }
  });

  it('past ARGON2_MAX_WAITING queued checks, a new one is refused at once with 503 and Retry-After; the queue then serves again', async () => {
    const h = new PasswordHasher({ ...config, ARGON2_MAX_CONCURRENCY: 1, ARGON2_MAX_WAITING: 2 });
    const hash = await h.hash('correct horse');
    const running = [h.verify(hash, 'correct horse'), h.verify(hash, 'correct horse'), h.verify(hash, 'correct horse')];
    const refused = await h.verify(hash, 'correct horse').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toMatchObject({ code: 'server/unavailable', status: 503, options: { headers: { 'Retry-After': '1' } } });
    expect(await Promise.all(running)).toEqual([true, true, true]);
    expect(await h.verify(hash, 'correct horse')).toBe(true);
  });
});
