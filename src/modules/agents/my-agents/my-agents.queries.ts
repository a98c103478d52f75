import { Command, Query } from '@nestjs/cqrs';
import { UserPrincipal } from '../../../shared/auth/auth-context';
import { Page } from '../../../shared/db/pagination';
import { RestoreMyAgentResponse, RevokeMyAgentResponse, UserAgentResponse } from './my-agents.dto';

/** spec 4.5: agents that acted on the caller (or that the caller revoked), last_action_at descending. */
export class ListMyAgentsQuery extends Query<Page<UserAgentResponse>> {
  constructor(
    readonly user: UserPrincipal,
    readonly limit: number,
    readonly cursor?: string,
  ) {
    super();
  }
}

/** spec 3.3: the caller withdraws an agent's access (GDPR art. 7(3)); idempotent. */
export class RevokeMyAgentCommand extends Command<RevokeMyAgentResponse> {
  constructor(
    readonly user: UserPrincipal,
    readonly agentId: string,
  ) {
    super();
  }
}

/** spec 3.3: the caller gives an agent its access back. */
export class RestoreMyAgentCommand extends Command<RestoreMyAgentResponse> {
  constructor(
    readonly user: UserPrincipal,
    readonly agentId: string,
  ) {
    super();
  }
}
