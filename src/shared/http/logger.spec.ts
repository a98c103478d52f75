import { Writable } from 'stream';
import pino from 'pino';
import { REDACT_PATHS } from './logger';

describe('log redaction', () => {
  it('removes credentials, tokens, secrets and dates of birth from log lines', () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk, _enc, cb) => (lines.push(String(chunk)), cb()) });
    const log = pino({ redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
    log.info({
      req: { headers: { authorization: 'Bearer eyJsecret', cookie: 'authp_dashboard=abc', 'x-api-key': 'authp_key', 'x-csrf-token': 'csrf' } },
      res: { headers: { 'set-cookie': 'authp_dashboard=abc' } },
      body: { password: 'hunter2hunter2', refresh_token: 'id:secret', date_of_birth: '2001-02-03', client_secret: 'cs', token: 't0k' },
    });
    const out = lines.join('');
    for (const secret of ['eyJsecret', 'authp_dashboard=abc', 'authp_key', 'hunter2hunter2', 'id:secret', '2001-02-03', '"cs"', 't0k']) {
      expect(out).not.toContain(secret);
    }
    expect(out).toContain('[redacted]');
  });
});
