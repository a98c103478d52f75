import { Module } from '@nestjs/common';
import { MaintenanceModule } from '../../shared/maintenance/maintenance.scheduler';
import { SessionsModule } from '../sessions/sessions.module';
import { AnonymousSigninHandler } from './anonymous-signin/anonymous-signin.handler';
import { GuestsController } from './guests.controller';
import { GuestPurgeScheduler } from './purge/guest-purge.scheduler';
import { GuestPurgeService } from './purge/guest-purge.service';
import { GetAnonymousSettingsHandler, UpdateAnonymousSettingsHandler } from './settings/anonymous-settings.handlers';

/**
 * Guests (spec 3.1): anonymous sign-in, the tenant's guest settings and the purge. Claiming a
 * guest is the users module's ClaimGuest command. A guest cannot belong to an organization:
 * membership code must refuse users with is_anonymous.
 */
@Module({
  imports: [SessionsModule],
  controllers: [GuestsController],
  providers: [AnonymousSigninHandler, GetAnonymousSettingsHandler, UpdateAnonymousSettingsHandler, GuestPurgeService],
  exports: [GuestPurgeService],
})
export class GuestsModule {}

/** The worker's part: the purge service and its daily schedule (no HTTP). */
@Module({
  imports: [MaintenanceModule],
  providers: [GuestPurgeService, GuestPurgeScheduler],
  exports: [GuestPurgeService, GuestPurgeScheduler],
})
export class GuestsWorkerModule {}
