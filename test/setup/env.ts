import { randomBytes } from 'crypto';

// Every test file gets its own Redis key prefix, so limits and caches never leak between files.
process.env.NODE_ENV = 'test';
process.env.REDIS_KEY_PREFIX = `authp_test_${process.env.TEST_RUN_ID ?? 'x'}_${randomBytes(3).toString('hex')}:`;
process.env.LOG_LEVEL ??= 'silent';
process.env.TRUST_PROXY = 'loopback';
process.env.PUBLIC_BASE_URL ??= 'http://localhost:3001';
process.env.KEY_ENCRYPTION_KEY ??= Buffer.alloc(32, 9).toString('base64');
