import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { MaintenanceScheduler } from '../../../shared/maintenance/maintenance.scheduler';
import { GuestPurgeService, PurgeAlreadyRunningError } from './guest-purge.service';

export { MAINTENANCE_QUEUE } from '../../../shared/maintenance/maintenance.scheduler';
/** Fixed scheduler id: however many workers run, BullMQ keeps one schedule and runs each job once. */
export const GUEST_PURGE_SCHEDULER_ID = 'guests-purge-daily';
export const GUEST_PURGE_PATTERN = '30 2 * * *'; // spec 8: daily 02:30 UTC
export const GUEST_PURGE_JOB = 'guests-purge';
/**
 * A worker that finds no purge completed within this long runs one at once (a missed 02:30):
 * two hours over the day, so that a reconciler pass landing after yesterday's completion + 24 h,
 * while today's run is still under way, queues no needless catch-up.
 */
export const GUEST_PURGE_CATCH_UP_AFTER_MS = 26 * 3600 * 1000;

/** Worker-only: the daily purge as a maintenance job (BullMQ job scheduler), with its catch-up. */
@Injectable()
export class GuestPurgeScheduler implements OnModuleInit {
  private readonly logger = new Logger(GuestPurgeScheduler.name);

  constructor(
    private readonly purge: GuestPurgeService,
    private readonly maintenance: MaintenanceScheduler,
  ) {}

  onModuleInit(): void {
    this.maintenance.register({
      name: GUEST_PURGE_JOB,
      schedulerId: GUEST_PURGE_SCHEDULER_ID,
      pattern: GUEST_PURGE_PATTERN,
      catchUpAfterMs: GUEST_PURGE_CATCH_UP_AFTER_MS,
      run: () => this.runScheduled(),
    });
  }

  /**
   * A run while another (a CLI run, another worker's catch-up) is in progress leaves the work to
   * it; only a run that ran is recorded (by GuestPurgeService, as it releases its lease), so a
   * skipped one never hides a missed day from the catch-up.
   */
  private async runScheduled(): Promise<unknown> {
    try {
      return await this.purge.runOnce();
    } catch (err) {
      if (!(err instanceof PurgeAlreadyRunningError)) throw err;
      this.logger.log('guest purge: another run is in progress, this one is skipped');
      return { skipped: 'already running' };
    }
  }

  /** The next scheduled run (for the ops check and tests). */
  nextRun(): Promise<number | undefined> {
    return this.maintenance.nextRun(GUEST_PURGE_SCHEDULER_ID);
  }
}
