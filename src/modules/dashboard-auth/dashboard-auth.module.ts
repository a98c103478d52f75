import { Module } from '@nestjs/common';
import { UsersModule } from '../users/users.module';
import { DashboardAudit } from './dashboard-audit.service';
import { DashboardAuthController } from './dashboard-auth.controller';
import { DashboardMembershipsService } from './dashboard-memberships.service';
import { DeleteDashboardAccountHandler } from './delete-account/delete-account.handler';
import { AcceptInviteHandler, InviteMemberHandler } from './invites/invite-member.handler';
import { DashboardLoginHandler } from './login/dashboard-login.handler';
import { DashboardLogoutHandler } from './logout/dashboard-logout.handler';
import { DashboardReauthHandler } from './reauth.handler';
import { MembersController } from './members/members.controller';
import { InvitesController } from './invites/invites.controller';
import { ListInvitesHandler, RevokeInviteHandler } from './invites/pending-invites';
import { DashboardPasswordController } from './password/dashboard-password.controller';
import { DashboardForgotPasswordHandler, DashboardResetPasswordHandler } from './password/dashboard-password.handlers';
import { ChangeMemberRoleHandler, ListMembersHandler, RemoveMemberHandler } from './members/members.handlers';

/** Dashboard (tenant administrator) authentication: sessions, re-auth, invitations and roles. */
@Module({
  imports: [UsersModule],
  controllers: [DashboardAuthController, MembersController, InvitesController, DashboardPasswordController],
  providers: [
    DashboardLoginHandler,
    DashboardLogoutHandler,
    DashboardReauthHandler,
    DeleteDashboardAccountHandler,
    InviteMemberHandler,
    AcceptInviteHandler,
    ListMembersHandler,
    ChangeMemberRoleHandler,
    RemoveMemberHandler,
    ListInvitesHandler,
    RevokeInviteHandler,
    DashboardForgotPasswordHandler,
    DashboardResetPasswordHandler,
    DashboardMembershipsService,
    DashboardAudit,
  ],
  // onboarding's signup replay signs its owner in again (dashboard.signed_in)
  exports: [DashboardAudit],
})
export class DashboardAuthModule {}
