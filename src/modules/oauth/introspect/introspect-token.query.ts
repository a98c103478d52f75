import { Query } from '@nestjs/cqrs';
import { FormParams } from '../oauth-form';

/** RFC 7662 section 2.2 introspection response: `{active: false}` alone, or the token's claims. */
export interface IntrospectionResponse {
  active: boolean;
  scope?: string;
  /** the agent (act.sub) for agent tokens */
  client_id?: string;
  token_type?: 'Bearer';
  exp?: number;
  iat?: number;
  sub?: string;
  aud?: string | string[];
  iss?: string;
  jti?: string;
  tenant_id?: string;
  act?: { sub: string };
  amr?: string[];
  aal?: string;
  role?: string;
  is_anonymous?: boolean;
}

/** POST /oauth/introspect (RFC 7662) for the tenant's resource servers (contract "Agents and OAuth"). */
export class IntrospectTokenQuery extends Query<IntrospectionResponse> {
  constructor(
    readonly form: FormParams,
    readonly authorization: string | undefined,
    readonly apiKey: string | undefined,
  ) {
    super();
  }
}
