import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { DeleteUserHandler } from './admin/delete-user/delete-user.handler';
import { GetUserHandler } from './admin/get-user/get-user.handler';
import { ListUsersHandler } from './admin/list-users/list-users.handler';
import { UsersAdminController } from './admin/users-admin.controller';
import { ClaimGuestHandler } from './claim-guest/claim-guest.handler';
import { LoginPolicy } from './login-policy.service';
import { LoginUserHandler } from './login/login-user.handler';
import { LogoutHandler } from './logout/logout.handler';
import { GetMeHandler } from './me/get-me.handler';
import { RegisterAuthGuard } from './register/register-auth.guard';
import { RegisterUserHandler } from './register/register-user.handler';
import { UserEmailPolicy } from './user-email-policy.service';
import { UsersController } from './users.controller';

/**
 * End users of a tenant: register (and claim a guest), password login, logout, me; and for the
 * tenant's administrators (admin/): find, list and erase them.
 */
@Module({
  imports: [SessionsModule],
  controllers: [UsersController, UsersAdminController],
  providers: [
    RegisterUserHandler,
    ClaimGuestHandler,
    LoginUserHandler,
    LogoutHandler,
    GetMeHandler,
    ListUsersHandler,
    GetUserHandler,
    DeleteUserHandler,
    RegisterAuthGuard,
    UserEmailPolicy,
    LoginPolicy,
  ],
  exports: [UserEmailPolicy, LoginPolicy],
})
export class UsersModule {}
