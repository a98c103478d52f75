import { Query } from '@nestjs/cqrs';

export interface MeResponse {
  id: string;
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
  ) {
    super();
  }
}
