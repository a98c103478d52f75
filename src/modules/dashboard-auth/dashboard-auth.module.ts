import { Module } from '@nestjs/common';
import { UsersModule } from '../users/users.module';
import { DashboardAudit } from './dashboard-audit.service';
import { DashboardAuthController } from './dashboard-auth.controller';
import { DashboardMembershipsService } from './dashboard-memberships.service';
import { AcceptInviteHandler, InviteMemberHandler } from './invites/invite-member.handler';
import { DashboardLoginHandler } from './login/dashboard-login.handler';
import { DashboardLogoutHandler } from './logout/dashboard-logout.handler';
import { DashboardReauthHandler } from './reauth.handler';

/** Dashboard (tenant administrator) authentication: sessions, re-auth, invitations and roles. */
@Module({
  imports: [UsersModule],
  controllers: [DashboardAuthController],
  providers: [DashboardLoginHandler, DashboardLogoutHandler, DashboardReauthHandler, InviteMemberHandler, AcceptInviteHandler, DashboardMembershipsService, DashboardAudit],
})
export class DashboardAuthModule {}
