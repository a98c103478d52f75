import { applyDecorators, Type } from '@nestjs/common';
import { ApiExtraModels, ApiProperty, ApiPropertyOptional, ApiResponse, getSchemaPath, OpenAPIObject } from '@nestjs/swagger';
import { ERROR_CATALOG, ErrorCode } from '../errors/error-codes';

// OpenAPI documentation only: nothing here runs on a request.

export const PROBLEM_JSON = 'application/problem+json';

/** One `errors[]` entry of a problem: the offending field (dotted path) and what is wrong with it. */
export class ProblemFieldErrorDto {
  @ApiProperty({ example: 'password' }) field!: string;
  @ApiProperty({ example: 'password must be longer than or equal to 12 characters' }) message!: string;
}

/** RFC 9457 problem details: the one error body of every non-/oauth endpoint (contract "Conventions"). */
export class ProblemDto {
  @ApiProperty({ example: 'about:blank', description: '`about:blank` or a documentation URL' }) type!: string;
  @ApiProperty({ description: 'the title of the code (stable per code)' }) title!: string;
  @ApiProperty({ type: 'integer', minimum: 400, maximum: 599, description: 'equals the HTTP status' }) status!: number;
  @ApiProperty({ enum: Object.keys(ERROR_CATALOG), description: 'stable machine-readable code' }) code!: string;
  @ApiPropertyOptional({ description: 'human-readable explanation of this occurrence' }) detail?: string;
  @ApiPropertyOptional({ type: [ProblemFieldErrorDto], description: 'one entry per offending field (validation failures)' }) errors?: ProblemFieldErrorDto[];
  @ApiProperty({ description: 'the request id, also sent in the X-Request-Id response header' }) request_id!: string;
  @ApiPropertyOptional({ description: 'mfa/enrollment_required only: an enrollment-only token for POST /v1/auth/mfa/totp/setup and verify-setup' })
  enrollment_token?: string;
  @ApiPropertyOptional({ type: 'integer', description: 'mfa/enrollment_required only: seconds the enrollment_token stays valid' })
  enrollment_token_expires_in?: number;
}

const RATE_LIMIT_HEADERS = {
  'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer' } },
  'X-Service-Docs': { description: 'URL of the rate limits documentation', schema: { type: 'string', format: 'uri' } },
};
/**
 * The WWW-Authenticate of a route's 401 and 403 answers, by the credential the route authenticates
 * with (challengeFor, insufficientScope, stepUpRequired in app-error.ts say the rule).
 */
const challengeHeader = (description: string) => ({ 'WWW-Authenticate': { description, schema: { type: 'string' } } });
const CHALLENGES = {
  bearer401: challengeHeader(
    'Bearer challenge on every 401 (RFC 6750 section 3, RFC 9110 section 15.5.2): `Bearer error="invalid_token"` (with `error_description` such as `agent_revoked` when there is one) for a token that was refused; ' +
      '`Bearer error="invalid_token", error_description="tenant_mismatch"` (or `"invalid_api_key"`) when the X-API-Key sent beside the token is of another tenant (or unknown or revoked); ' +
      'the bare `Bearer realm="api"` (code `auth/unauthorized`) when no bearer credentials were sent (no Authorization header, or one of another scheme), and when a password or code in the body is wrong; ' +
      'a route that also takes X-API-Key alone (register) answers a request without a token as X-API-Key routes do: `ApiKey realm="api"`',
  ),
  apiKey401: challengeHeader('`ApiKey realm="api"` on every 401 of this X-API-Key route (RFC 9110 section 15.5.2), whichever credential failed: the key, or a password, code or refresh token in the body'),
  dashboard401: challengeHeader('`Cookie realm="dashboard"` on every 401 of the dashboard (RFC 9110 section 15.5.2): no live session cookie, or a wrong password'),
  bearer403: (codes: ErrorCode[]) =>
    challengeHeader(
      [
        ...(codes.includes('auth/forbidden') ? ['`auth/forbidden`: `Bearer error="insufficient_scope", error_description="..."` (RFC 6750 section 3.1): the token is valid but may not do this (an agent\'s delegated token, a guest\'s)'] : []),
        ...(codes.includes('auth/step_up_required') ? ['`auth/step_up_required`: `Bearer error="insufficient_user_authentication", error_description="...", max_age=<seconds>` (RFC 9470 section 3): step up (or sign in, where the route accepts it) within `max_age` seconds and retry'] : []),
        'no challenge on the other 403s',
      ].join('; '),
    ),
};

type RouteCredential = 'bearer' | 'api-key' | 'dashboard';

/** The credential a route's documented codes show it authenticates with (a route with no 401 of a token or key: the dashboard's). */
const credentialOf = (codes: ErrorCode[]): RouteCredential =>
  codes.includes('auth/invalid_token') ? 'bearer' : codes.includes('auth/invalid_api_key') ? 'api-key' : 'dashboard';

function challengeHeaders(status: number, codes: ErrorCode[], credential: RouteCredential | undefined) {
  if (status === 401 && credential) return credential === 'bearer' ? CHALLENGES.bearer401 : credential === 'api-key' ? CHALLENGES.apiKey401 : CHALLENGES.dashboard401;
  if (status === 403 && credential === 'bearer' && (codes.includes('auth/forbidden') || codes.includes('auth/step_up_required'))) return CHALLENGES.bearer403(codes);
  return {};
}

function example(code: ErrorCode, status: number): Record<string, unknown> {
  const { title } = ERROR_CATALOG[code];
  return {
    type: 'about:blank',
    title,
    status,
    code,
    ...(code === 'request/invalid' ? { detail: 'One or more fields are invalid', errors: [{ field: 'email', message: 'email must be an email' }] } : {}),
    request_id: '5b0f8d5e-2f43-4d47-9f0a-6f2d1c8e7a10',
  };
}

function problemResponse(status: number, codes: ErrorCode[], description?: string, credential?: RouteCredential, challenge?: Record<string, unknown>) {
  const headers = {
    ...(status === 429 ? RATE_LIMIT_HEADERS : {}),
    ...(challenge ?? challengeHeaders(status, codes, credential)),
  };
  return ApiResponse({
    status,
    description: description ?? codes.map((c) => `\`${c}\`: ${ERROR_CATALOG[c].title}`).join('; '),
    ...(Object.keys(headers).length ? { headers } : {}),
    content: {
      [PROBLEM_JSON]: {
        schema: { $ref: getSchemaPath(ProblemDto) },
        examples: Object.fromEntries(codes.map((c) => [c, { summary: ERROR_CATALOG[c].title, value: example(c, status) }])),
      },
    },
  });
}

/**
 * Documents the errors a route can answer as `application/problem+json` responses with the
 * shared ProblemDto schema: one response per status, listing its codes in the description and
 * one example per code. Give every code of a route in one call (a second call for the same
 * status would replace the first one's content).
 */
export function ApiProblems(...codes: ErrorCode[]): MethodDecorator & ClassDecorator {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const { status } = ERROR_CATALOG[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const statuses = [...byStatus.keys()].sort((a, b) => a - b);
  const credential = credentialOf([...byStatus.values()].flat());
  return applyDecorators(ApiExtraModels(ProblemDto), ...statuses.map((s) => problemResponse(s, byStatus.get(s)!, undefined, credential)));
}

/**
 * A problem response whose status differs from its code's catalog status (e.g. readiness: 503
 * `server/error`), or that the route's own text describes; `challenge`: the WWW-Authenticate a
 * 401 carries (e.g. metrics: `Bearer realm="metrics"`).
 */
export function ApiProblemResponse(status: number, code: ErrorCode, description: string, challenge?: string): MethodDecorator & ClassDecorator {
  return applyDecorators(ApiExtraModels(ProblemDto), problemResponse(status, [code], description, undefined, challenge ? challengeHeader(challenge) : undefined));
}

/** The OpenAPI security scheme of OAuth client credentials sent by HTTP Basic. */
export const OAUTH_CLIENT_BASIC = 'oauth_client_basic';

/** Code sets shared by many routes (the guards' answers). */
export const Problems = {
  /** a JSON body or query DTO: validation (one `errors[]` entry per field) and unparsable JSON */
  input: ['request/invalid', 'request/malformed_json', 'request/too_large', 'request/unsupported_media_type'] as ErrorCode[],
  /** a cursor-paginated list query */
  list: ['request/invalid', 'request/invalid_cursor'] as ErrorCode[],
  /** X-API-Key */
  apiKey: ['auth/invalid_api_key'] as ErrorCode[],
  /**
   * Authorization: Bearer, with an optional X-API-Key naming the tenant (the revocation state is read fail-closed: 503);
   * 429 for an agent token past its agent's api_calls_per_min (spec 2.10)
   */
  bearer: ['auth/unauthorized', 'auth/invalid_token', 'auth/tenant_mismatch', 'auth/invalid_api_key', 'rate_limit/exceeded', 'server/unavailable'] as ErrorCode[],
  /** a @RateLimit route (the limiter fails closed: 503) */
  rateLimited: ['rate_limit/exceeded', 'server/unavailable'] as ErrorCode[],
  /** dashboard session, read (per-session read limit) */
  dashboardRead: ['auth/unauthorized', 'rate_limit/exceeded', 'server/unavailable'] as ErrorCode[],
  /** dashboard session, state-changing (X-CSRF-Token, per-session write limit; a body on a route without one is 400) */
  dashboardWrite: ['request/invalid', 'auth/unauthorized', 'csrf/invalid', 'rate_limit/exceeded', 'server/unavailable'] as ErrorCode[],
  /** `{slug}` resolved against the session's memberships (no membership: 404) */
  tenant: ['tenant/not_found'] as ErrorCode[],
  /** owners write, members read */
  owner: ['auth/forbidden'] as ErrorCode[],
  /** the tenant's address policy (422) */
  emailPolicy: ['email/disposable_blocked', 'email/subaddress_blocked', 'email/domain_not_allowed', 'email/domain_blocked'] as ErrorCode[],
};

/** `pagination` of every list (contract "Conventions"). */
export class PaginationDto {
  @ApiProperty({ type: String, nullable: true, description: 'opaque; pass as `cursor` for the next page (null on the last page)' }) next_cursor!: string | null;
  @ApiProperty() has_more!: boolean;
}

/** 200 `{data: Model[], pagination: {next_cursor, has_more}}`. */
export function ApiPageResponse(model: Type<unknown>, description?: string): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ApiExtraModels(model, PaginationDto),
    ApiResponse({
      status: 200,
      description: description ?? `a page of ${model.name}, cursor-paginated`,
      schema: {
        type: 'object',
        required: ['data', 'pagination'],
        properties: {
          data: { type: 'array', items: { $ref: getSchemaPath(model) } },
          pagination: { $ref: getSchemaPath(PaginationDto) },
        },
      },
    }),
  );
}

type DocResponse = { description?: string; content?: Record<string, { schema?: unknown; examples?: Record<string, unknown> }> };

/** A problem+json response of one code, its example included (the declare* helpers below). */
const problemEntry = (code: ErrorCode): [string, DocResponse] => {
  const { status, title } = ERROR_CATALOG[code];
  return [String(status), { description: `\`${code}\`: ${title}`, content: { [PROBLEM_JSON]: { schema: { $ref: getSchemaPath(ProblemDto) }, examples: { [code]: { summary: title, value: example(code, status) } } } } }];
};

/**
 * Every request that may carry a body meets the body parsers before its route: a body too large
 * (413), not JSON (415) or not parsable (400 `request/malformed_json`) is refused on every POST,
 * PUT, PATCH and DELETE, a route without a body of its own included. Declared where the route's
 * decorators did not; the /oauth endpoints answer a body too large in their RFC 6749 envelope.
 */
export function declareBodyRefusals(openapi: OpenAPIObject): void {
  for (const [path, ops] of Object.entries(openapi.paths)) {
    for (const method of ['post', 'put', 'patch', 'delete'] as const) {
      const op = ops[method];
      if (!op) continue;
      const responses = op.responses as Record<string, DocResponse | undefined>;
      if (path.startsWith('/oauth/')) {
        const envelope = responses['400']?.content;
        responses['413'] ??= { description: 'invalid_request: the request body is too large', ...(envelope ? { content: envelope } : {}) };
        continue;
      }
      for (const [status, response] of [problemEntry('request/too_large'), problemEntry('request/unsupported_media_type')]) responses[status] ??= response;
      const [, malformed] = problemEntry('request/malformed_json');
      const bad = responses['400'];
      const examples = bad?.content?.[PROBLEM_JSON]?.examples;
      if (!bad) responses['400'] = malformed;
      else if (examples && !examples['request/malformed_json']) {
        Object.assign(examples, malformed.content![PROBLEM_JSON].examples);
        bad.description = `${bad.description ?? ''}; ${malformed.description}`;
      }
    }
  }
}

/**
 * A path segment over 2,048 characters is refused before routing (414 `request/uri_too_long`):
 * declared on every operation whose path has a parameter (the only place a client puts one).
 */
export function declareLongPathRefusals(openapi: OpenAPIObject): void {
  for (const [path, ops] of Object.entries(openapi.paths)) {
    if (!path.includes('{')) continue;
    for (const op of Object.values(ops) as { responses?: Record<string, DocResponse> }[]) {
      if (!op?.responses) continue;
      const [status, response] = problemEntry('request/uri_too_long');
      op.responses[status] ??= response;
    }
  }
}

/**
 * X-CSRF-Token, said as the dashboard guard enforces it: required on every state-changing request
 * authenticated by the session cookie (403 `csrf/invalid` without it), not a parameter of reads.
 */
export function csrfOnWrites(openapi: OpenAPIObject): void {
  for (const ops of Object.values(openapi.paths)) {
    for (const [method, op] of Object.entries(ops) as [string, { parameters?: { name?: string; in?: string; required?: boolean; description?: string }[] }][]) {
      if (!op?.parameters) continue;
      const isCsrf = (p: { name?: string; in?: string }) => p.in === 'header' && p.name?.toLowerCase() === 'x-csrf-token';
      if (method === 'get' || method === 'head') op.parameters = op.parameters.filter((p) => !isCsrf(p));
      else for (const p of op.parameters.filter(isCsrf)) Object.assign(p, { required: true, description: "the session's csrf_token (from login, signup or /v1/auth/dashboard/me); without it 403 csrf/invalid" });
    }
  }
}

type SchemaNode = { $ref?: string; properties?: Record<string, SchemaNode>; items?: SchemaNode; required?: string[]; additionalProperties?: boolean | SchemaNode; allOf?: SchemaNode[] };
type OpenApiDoc = { paths: Record<string, Record<string, { requestBody?: { required?: boolean; content?: Record<string, { schema?: SchemaNode }> } }>>; components?: { schemas?: Record<string, SchemaNode> } };

/**
 * What the ValidationPipe enforces (whitelist + forbidNonWhitelisted), said in the document: every
 * JSON request schema, and the DTOs nested in it, refuses unknown properties
 * (`additionalProperties: false`; a free-form field such as public_metadata is an inline object and
 * stays open). A body whose schema requires nothing may be omitted (`requestBody.required: false`).
 * Form bodies (/oauth/*) stay open: RFC 6749 says unknown parameters are ignored.
 */
export function closeRequestSchemas(openapi: OpenAPIObject): void {
  const doc = openapi as unknown as OpenApiDoc;
  const schemas = doc.components?.schemas ?? {};
  const byRef = (ref: string) => schemas[ref.replace('#/components/schemas/', '')];
  const seen = new Set<SchemaNode>();
  const close = (node: SchemaNode | undefined) => {
    if (!node) return;
    if (node.$ref) return close(byRef(node.$ref));
    if (seen.has(node)) return;
    seen.add(node);
    node.allOf?.forEach(close);
    if (node.items) close(node.items);
    if (node.properties) {
      node.additionalProperties = false;
      Object.values(node.properties).forEach((p) => (p.$ref || p.items || p.allOf ? close(p) : undefined));
    }
  };
  for (const ops of Object.values(doc.paths)) {
    for (const op of Object.values(ops)) {
      const schema = op.requestBody?.content?.['application/json']?.schema;
      if (!schema || !op.requestBody) continue;
      close(schema);
      const target = schema.$ref ? byRef(schema.$ref) : schema;
      if (!target?.required?.length) op.requestBody.required = false;
    }
  }
}
