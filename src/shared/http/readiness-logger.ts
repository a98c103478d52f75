import { Injectable, Logger, LoggerService } from '@nestjs/common';

/** How often a failing readiness probe is logged at most (a probe runs every few seconds). */
export const READINESS_LOG_INTERVAL_MS = 60_000;

/**
 * Terminus' logger: a failed readiness check is a warning (the orchestrator acts on the 503; the
 * stores' own outages are logged where requests meet them), and a probe every few seconds during an
 * outage writes one line a minute, saying how many failures it stood for, not one line each.
 */
@Injectable()
export class ReadinessLogger implements LoggerService {
  private readonly logger = new Logger('Readiness');
  private lastAt = 0;
  private suppressed = 0;

  log(): void {}

  warn(message: unknown): void {
    this.report(message);
  }

  error(message: unknown): void {
    this.report(message);
  }

  private report(message: unknown): void {
    const at = Date.now();
    if (this.lastAt && at - this.lastAt < READINESS_LOG_INTERVAL_MS) {
      this.suppressed++;
      return;
    }
    const more = this.suppressed ? ` (and ${this.suppressed} more failed checks since the last line)` : '';
    this.lastAt = at;
    this.suppressed = 0;
    this.logger.warn(`readiness check failed: ${typeof message === 'string' ? message : JSON.stringify(message)}${more}`);
  }
}
