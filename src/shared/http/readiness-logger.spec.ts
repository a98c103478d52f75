import { Logger } from '@nestjs/common';
import { READINESS_LOG_INTERVAL_MS, ReadinessLogger } from './readiness-logger';

describe('ReadinessLogger', () => {
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it('writes a failed check as one warning a minute, counting the failures it stood for', () => {
    jest.useFakeTimers({ now: 1_000_000 });
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const log = new ReadinessLogger();
    log.error('Health Check has failed! {"redis":{"status":"down"}}');
    jest.advanceTimersByTime(5_000);
    log.error('Health Check has failed! {"redis":{"status":"down"}}');
    log.error('Health Check has failed! {"redis":{"status":"down"}}');
    expect(warn).toHaveBeenCalledTimes(1);
    jest.advanceTimersByTime(READINESS_LOG_INTERVAL_MS);
    log.error('Health Check has failed! {"postgres":{"status":"down"}}');
    expect(warn).toHaveBeenCalledTimes(2);
    expect(warn.mock.calls[0][0]).toBe('readiness check failed: Health Check has failed! {"redis":{"status":"down"}}');
    expect(warn.mock.calls[1][0]).toMatch(/postgres.*\(and 2 more failed checks since the last line\)$/);
    expect(error).not.toHaveBeenCalled();
  });
});
