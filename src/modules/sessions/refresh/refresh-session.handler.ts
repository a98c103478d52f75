import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { SessionsService, TokenResponse } from '../sessions.service';
import { RefreshSessionCommand } from './refresh-session.command';

@CommandHandler(RefreshSessionCommand)
export class RefreshSessionHandler implements ICommandHandler<RefreshSessionCommand, TokenResponse> {
  constructor(private readonly sessions: SessionsService) {}

  execute(cmd: RefreshSessionCommand): Promise<TokenResponse> {
    return this.sessions.refresh(cmd.tenantId, cmd.refreshToken);
  }
}
