import { Module } from '@nestjs/common';
import { UsersModule } from '../users/users.module';
import { DashboardAuthController } from './dashboard-auth.controller';
import { DashboardMembershipsService } from './dashboard-memberships.service';
import { AcceptInviteHandler, InviteMemberHandler } from './invites/invite-member.handler';
import { DashboardLoginHandler } from './login/dashboard-login.handler';
import { DashboardReauthHandler } from './reauth.handler';

/** Dashboard (tenant administrator) authentication: sessions, re-auth, invitations and roles. */
@Module({
  imports: [UsersModule],
  controllers: [DashboardAuthController],
  providers: [DashboardLoginHandler, DashboardReauthHandler, InviteMemberHandler, AcceptInviteHandler, DashboardMembershipsService],
})
export class DashboardAuthModule {}
