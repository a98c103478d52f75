import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { ClaimGuestHandler } from './claim-guest/claim-guest.handler';
import { LoginPolicy } from './login-policy.service';
import { LoginUserHandler } from './login/login-user.handler';
import { LogoutHandler } from './logout/logout.handler';
import { GetMeHandler } from './me/get-me.handler';
import { RegisterAuthGuard } from './register/register-auth.guard';
import { RegisterUserHandler } from './register/register-user.handler';
import { UserEmailPolicy } from './user-email-policy.service';
import { UsersController } from './users.controller';

/** End users of a tenant: register (and claim a guest), password login, logout, me. */
@Module({
  imports: [SessionsModule],
  controllers: [UsersController],
  providers: [RegisterUserHandler, ClaimGuestHandler, LoginUserHandler, LogoutHandler, GetMeHandler, RegisterAuthGuard, UserEmailPolicy, LoginPolicy],
  exports: [UserEmailPolicy, LoginPolicy],
})
export class UsersModule {}
