import { Query } from '@nestjs/cqrs';
import { Prefetched } from '../../../shared/auth/bearer-prefetch';

export interface MeResponse {
  id: string;
  /** null (email_verified false) for guests, and for an agent token whose scope lacks `email` */
  email: string | null;
  email_verified: boolean;
  is_anonymous: boolean;
  role: string;
  created_at: string;
  last_sign_in_at: string | null;
  public_metadata: Record<string, unknown>;
}

/** The current user of a bearer token (contract: GET /v1/auth/me). */
export class GetMeQuery extends Query<MeResponse> {
  constructor(
    readonly tenantId: string,
    readonly userId: string,
    /** the `role` claim of the presented token: a guest's role is the tenant default it inherits (spec 5 rule 5) */
    readonly tokenRole?: string,
    /** the profile slot and activity window as the bearer guard read them (UserProfileCache.prefetchKeys) */
    readonly prefetched?: Prefetched,
    /** the granted scopes of an agent (delegated) token; undefined for the user's own token */
    readonly delegatedScopes?: readonly string[],
  ) {
    super();
  }
}
