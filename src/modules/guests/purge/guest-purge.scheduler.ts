import { Injectable, OnModuleInit } from '@nestjs/common';
import { MaintenanceRunContext, MaintenanceScheduler } from '../../../shared/maintenance/maintenance.scheduler';
import { GuestPurgeService } from './guest-purge.service';

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
      run: (ctx) => this.runScheduled(ctx),
    });
  }

  /**
   * The run under the job's lease holder (a retry or stalled re-run of the job reclaims the lease
   * its dead or failed attempt left). A run while another holder's (a CLI run, another
   * occurrence's) is in progress throws PurgeAlreadyRunningError: the maintenance worker puts the
   * job back until that lease ends, so it is neither lost nor completed without running; only a
   * run that ran is recorded (by GuestPurgeService, as it releases its lease), so the catch-up
   * sees a missed day.
   */
  private runScheduled(ctx: MaintenanceRunContext): Promise<unknown> {
    return this.purge.runOnce({ holder: ctx.holder });
  }

  /** The next scheduled run (for the ops check and tests). */
  nextRun(): Promise<number | undefined> {
    return this.maintenance.nextRun(GUEST_PURGE_SCHEDULER_ID);
  }
}
