import { Body, Controller, Delete, Get, HttpCode, Post, Query } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { EnvSchema } from '../../config/config';
import { CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { Page } from '../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../shared/http/api-docs';
import { UuidParam } from '../../shared/http/uuid-param';
import { retryDelayMs, retrySpanMs } from './backoff';
import { CreateWebhookCommand } from './create-webhook/create-webhook.command';
import { CreateWebhookRequestDto } from './create-webhook/create-webhook.request.dto';
import { DeleteWebhookCommand } from './delete-webhook/delete-webhook.command';
import { EnableWebhookCommand } from './enable-webhook/enable-webhook.command';
import { GetWebhookQuery } from './get-webhook/get-webhook.query';
import { ListDeliveriesQuery } from './list-deliveries/list-deliveries.query';
import { ListDeliveriesQueryDto } from './list-deliveries/list-deliveries.request.dto';
import { ListWebhooksQuery } from './list-webhooks/list-webhooks.query';
import { ListWebhooksQueryDto } from './list-webhooks/list-webhooks.request.dto';
import { redactedUrl, REGISTRATION_DNS_TIMEOUT_MS } from './url-policy';
import { RotateWebhookSecretCommand } from './rotate-secret/rotate-webhook-secret.command';
import { DEFAULT_PREVIOUS_SECRET_TTL_SECONDS, RotateWebhookSecretRequestDto } from './rotate-secret/rotate-webhook-secret.request.dto';
import { CreatedWebhookEndpointResponse, RotatedWebhookSecretResponse, WebhookDeliveryResponse, WebhookEndpointResponse } from './webhook-endpoint.entity';
import { WebhookDeliveryResponseDto } from './webhooks.response.dto';

/** An unknown, malformed or other tenant's endpoint id: the same 404. */
const EndpointId = () => UuidParam('id', 'webhook/not_found');

/** 5000 -> "5 s", 120000 -> "2 min", 3600000 -> "1 h". */
function duration(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/** The delivery rules in terms of the settings, with their defaults (the deployment may change them). */
function deliveryDoc(): string {
  const d = new EnvSchema();
  const delays = Array.from({ length: d.WEBHOOK_MAX_ATTEMPTS - 1 }, (_, i) => duration(retryDelayMs(i + 1, d.WEBHOOK_BACKOFF_BASE_MS)));
  return (
    'Deliveries follow Standard Webhooks: POST of `{type, timestamp, data}` with headers `webhook-id` (the same on every retry), ' +
    '`webhook-timestamp` (seconds, of the attempt) and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, ' +
    'keyed with the base64-decoded part of the secret after `whsec_`). At least once; a 2xx within WEBHOOK_TIMEOUT_MS ' +
    `(default ${duration(d.WEBHOOK_TIMEOUT_MS)}, DNS lookup included) is a delivery; otherwise it is retried until WEBHOOK_MAX_ATTEMPTS attempts ` +
    `(default ${d.WEBHOOK_MAX_ATTEMPTS}) were made, with growing delays in units of WEBHOOK_BACKOFF_BASE_MS (defaults: ` +
    `${delays.join(', ')}; about ${Math.round(retrySpanMs(d.WEBHOOK_MAX_ATTEMPTS, d.WEBHOOK_BACKOFF_BASE_MS) / 3_600_000)} h). ` +
    'Redirects are not followed. An endpoint whose last WEBHOOK_DISABLE_AFTER_FAILED_DELIVERIES deliveries ' +
    `(default ${d.WEBHOOK_DISABLE_AFTER_FAILED_DELIVERIES}) all failed every attempt is disabled and the owners are emailed. ` +
    `The host name must resolve within ${REGISTRATION_DNS_TIMEOUT_MS / 1000} s at registration (400 on \`url\` otherwise); ` +
    '503 `server/unavailable` when the DNS lookup itself failed (a server failure, not "no such name"): retry later.'
  );
}

const DELIVERY_DOC = deliveryDoc();

/** Members read endpoints with their path and query redacted; owners, who manage them, see them whole. */
function asSeenBy<T extends { url: string }>(s: DashboardPrincipal, endpoint: T): T {
  return s.tenant!.role === 'owner' ? endpoint : { ...endpoint, url: redactedUrl(endpoint.url) };
}

const MEMBER_URL = 'To members (not owners) the `url` shows its origin, its path (unless `/`) as `/REDACTED` and its query, if any, as `?REDACTED` (a receiver may put a token in either, as Slack and Discord do in the path).';

@ApiTags('webhooks')
@Controller('v1/auth/dashboard/tenants/:slug/webhooks')
export class WebhooksController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Post()
  @HttpCode(201)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({ summary: 'Register a webhook endpoint (owner); `secret` is shown once, never listed', description: DELIVERY_DOC })
  @ApiCreatedResponse({ type: CreatedWebhookEndpointResponse })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner, 'webhook/limit_reached', 'server/unavailable')
  create(@CurrentDashboard() s: DashboardPrincipal, @Body() body: CreateWebhookRequestDto): Promise<CreatedWebhookEndpointResponse> {
    return this.commandBus.execute(new CreateWebhookCommand(s, body));
  }

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'List webhook endpoints (newest first, cursor-paginated); secrets are never listed', description: MEMBER_URL })
  @ApiPageResponse(WebhookEndpointResponse)
  @ApiProblems(...Problems.dashboardRead, ...Problems.list, ...Problems.tenant)
  async list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListWebhooksQueryDto): Promise<Page<WebhookEndpointResponse>> {
    const page: Page<WebhookEndpointResponse> = await this.queryBus.execute(new ListWebhooksQuery(s.tenant!.id, q.limit ?? 20, q.cursor));
    return { ...page, data: page.data.map((e) => asSeenBy(s, e)) };
  }

  @Get(':id')
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'Get a webhook endpoint', description: MEMBER_URL })
  @ApiOkResponse({ type: WebhookEndpointResponse })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, 'webhook/not_found')
  async get(@CurrentDashboard() s: DashboardPrincipal, @EndpointId() id: string): Promise<WebhookEndpointResponse> {
    return asSeenBy(s, await this.queryBus.execute(new GetWebhookQuery(s.tenant!.id, id)));
  }

  @Delete(':id')
  @HttpCode(204)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOperation({ summary: 'Delete a webhook endpoint and its delivery log (owner); queued deliveries are dropped' })
  @ApiNoContentResponse({ description: 'deleted' })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'webhook/not_found')
  async remove(@CurrentDashboard() s: DashboardPrincipal, @EndpointId() id: string): Promise<void> {
    await this.commandBus.execute(new DeleteWebhookCommand(s, id));
  }

  @Post(':id/enable')
  @HttpCode(200)
  // events start flowing to the URL again: a recent sign-in, as creating the endpoint needs
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({
    summary: 'Enable an endpoint that was disabled after repeated failures (owner, after a recent sign-in or reauth); idempotent',
    description:
      'Deliveries resume with the next event. Events that happened while the endpoint was disabled are never sent to it, not even those the worker had not processed yet when it was enabled. Deliveries pending at the disable whose next attempt came while it was disabled ended as failed (error `endpoint disabled`, in its delivery log); those whose next attempt comes after the enable are still sent.',
  })
  @ApiOkResponse({ type: WebhookEndpointResponse })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'webhook/not_found')
  enable(@CurrentDashboard() s: DashboardPrincipal, @EndpointId() id: string): Promise<WebhookEndpointResponse> {
    return this.commandBus.execute(new EnableWebhookCommand(s, id));
  }

  @Post(':id/rotate-secret')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({
    summary: 'Give an endpoint a new signing secret (owner, recent sign-in or reauth); the new `secret` is shown once',
    description:
      'Deliveries from now on are signed with the new secret and, until `previous_secret_expires_at` (previous_secret_ttl_seconds, default 1 day, ' +
      'at most 7 days; 0: not at all), also with the replaced one: `webhook-signature` then holds two space-separated `v1,` signatures, and a ' +
      'Standard Webhooks receiver accepts a message when either verifies, so it can switch to the new secret at its own pace. A secret replaced ' +
      'by an earlier rotation stops signing at once. A delivery being retried is signed with the secrets of its attempt.',
  })
  @ApiOkResponse({ type: RotatedWebhookSecretResponse })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner, 'webhook/not_found')
  rotateSecret(@CurrentDashboard() s: DashboardPrincipal, @EndpointId() id: string, @Body() body: RotateWebhookSecretRequestDto): Promise<RotatedWebhookSecretResponse> {
    return this.commandBus.execute(new RotateWebhookSecretCommand(s, id, body.previous_secret_ttl_seconds ?? DEFAULT_PREVIOUS_SECRET_TTL_SECONDS));
  }

  @Get(':id/deliveries')
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: "An endpoint's delivery log (newest first, cursor-paginated; optional status filter)" })
  @ApiPageResponse(WebhookDeliveryResponseDto)
  @ApiProblems(...Problems.dashboardRead, ...Problems.list, ...Problems.tenant, 'webhook/not_found')
  deliveries(@CurrentDashboard() s: DashboardPrincipal, @EndpointId() id: string, @Query() q: ListDeliveriesQueryDto): Promise<Page<WebhookDeliveryResponse>> {
    return this.queryBus.execute(new ListDeliveriesQuery(s.tenant!.id, id, q.limit ?? 20, q.cursor, q.status));
  }
}
