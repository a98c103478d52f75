import { Injectable, OnModuleInit } from '@nestjs/common';
import { MaintenanceScheduler } from '../../../shared/maintenance/maintenance.scheduler';
import { GuestPurgeService } from './guest-purge.service';

export { MAINTENANCE_QUEUE } from '../../../shared/maintenance/maintenance.scheduler';
/** Fixed scheduler id: however many workers run, BullMQ keeps one schedule and runs each job once. */
export const GUEST_PURGE_SCHEDULER_ID = 'guests-purge-daily';
export const GUEST_PURGE_PATTERN = '30 2 * * *'; // spec 8: daily 02:30 UTC

/** Worker-only: the daily purge as a maintenance job (BullMQ job scheduler). */
@Injectable()
export class GuestPurgeScheduler implements OnModuleInit {
  constructor(
    private readonly purge: GuestPurgeService,
    private readonly maintenance: MaintenanceScheduler,
  ) {}

  onModuleInit(): void {
    this.maintenance.register({ name: 'guests-purge', schedulerId: GUEST_PURGE_SCHEDULER_ID, pattern: GUEST_PURGE_PATTERN, run: () => this.purge.runOnce() });
  }

  /** The next scheduled run (for the ops check and tests). */
  nextRun(): Promise<number | undefined> {
    return this.maintenance.nextRun(GUEST_PURGE_SCHEDULER_ID);
  }
}
