import { Body, Controller, Delete, Get, HttpCode, Post, Query } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { Page } from '../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../shared/http/api-docs';
import { UuidParam } from '../../shared/http/uuid-param';
import { CreateWebhookCommand } from './create-webhook/create-webhook.command';
import { CreateWebhookRequestDto } from './create-webhook/create-webhook.request.dto';
import { DeleteWebhookCommand } from './delete-webhook/delete-webhook.command';
import { EnableWebhookCommand } from './enable-webhook/enable-webhook.command';
import { GetWebhookQuery } from './get-webhook/get-webhook.query';
import { ListDeliveriesQuery } from './list-deliveries/list-deliveries.query';
import { ListDeliveriesQueryDto } from './list-deliveries/list-deliveries.request.dto';
import { ListWebhooksQuery } from './list-webhooks/list-webhooks.query';
import { ListWebhooksQueryDto } from './list-webhooks/list-webhooks.request.dto';
import { CreatedWebhookEndpointResponse, WebhookDeliveryResponse, WebhookEndpointResponse } from './webhook-endpoint.entity';
import { WebhookDeliveryResponseDto } from './webhooks.response.dto';

/** An unknown, malformed or other tenant's endpoint id: the same 404. */
const EndpointId = () => UuidParam('id', 'webhook/not_found');

const DELIVERY_DOC =
  'Deliveries follow Standard Webhooks: POST of `{type, timestamp, data}` with headers `webhook-id` (the same on every retry), ' +
  '`webhook-timestamp` (seconds, of the attempt) and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, ' +
  'keyed with the base64-decoded part of the secret after `whsec_`). At least once; 2xx within 10 s is a delivery; otherwise ' +
  'retried 14 times after 5 s, 30 s, 2 min, 5 min, 15 min, 30 min, 1 h, 2 h, 3 h, 4 h, 5 h, 6 h, 6 h, 6 h (about 34 h). ' +
  'Redirects are not followed. An endpoint whose last 5 deliveries all failed every attempt is disabled and the owners are emailed.';

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
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner, 'webhook/limit_reached')
  create(@CurrentDashboard() s: DashboardPrincipal, @Body() body: CreateWebhookRequestDto): Promise<CreatedWebhookEndpointResponse> {
    return this.commandBus.execute(new CreateWebhookCommand(s, body));
  }

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'List webhook endpoints (newest first, cursor-paginated); secrets are never listed' })
  @ApiPageResponse(WebhookEndpointResponse)
  @ApiProblems(...Problems.dashboardRead, ...Problems.list, ...Problems.tenant)
  list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListWebhooksQueryDto): Promise<Page<WebhookEndpointResponse>> {
    return this.queryBus.execute(new ListWebhooksQuery(s.tenant!.id, q.limit ?? 20, q.cursor));
  }

  @Get(':id')
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'Get a webhook endpoint' })
  @ApiOkResponse({ type: WebhookEndpointResponse })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, 'webhook/not_found')
  get(@CurrentDashboard() s: DashboardPrincipal, @EndpointId() id: string): Promise<WebhookEndpointResponse> {
    return this.queryBus.execute(new GetWebhookQuery(s.tenant!.id, id));
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
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOperation({ summary: 'Enable an endpoint that was disabled after repeated failures (owner); idempotent' })
  @ApiOkResponse({ type: WebhookEndpointResponse })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'webhook/not_found')
  enable(@CurrentDashboard() s: DashboardPrincipal, @EndpointId() id: string): Promise<WebhookEndpointResponse> {
    return this.commandBus.execute(new EnableWebhookCommand(s, id));
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
