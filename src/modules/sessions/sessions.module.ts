import { Module } from '@nestjs/common';
import { RefreshSessionHandler } from './refresh/refresh-session.handler';
import { SessionsController } from './sessions.controller';
import { SessionsService } from './sessions.service';

/** End-user sessions: refresh-token rotation and access-token minting for every sign-in method. */
@Module({
  controllers: [SessionsController],
  providers: [SessionsService, RefreshSessionHandler],
  exports: [SessionsService],
})
export class SessionsModule {}
