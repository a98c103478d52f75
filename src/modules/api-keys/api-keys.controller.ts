import { Body, Controller, Delete, Get, HttpCode, Post, Query } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { Page } from '../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../shared/http/api-docs';
import { UuidParam } from '../../shared/http/uuid-param';
import { ApiKeyResponse, CreateApiKeyRequestDto, ListApiKeysQueryDto } from './api-keys.dto';
import { CreateApiKeyCommand, ListApiKeysQuery, RevokeApiKeyCommand } from './api-keys.handlers';
import { ApiKeyResponseDto, CreatedApiKeyResponseDto, RevokedApiKeyResponseDto } from './api-keys.response.dto';


@ApiTags('dashboard')
@Controller('v1/auth/dashboard/tenants/:slug/api-keys')
export class ApiKeysController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Post()
  @HttpCode(201)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({ summary: 'Create an API key (owner); `key` is shown once, only its hash is stored' })
  @ApiCreatedResponse({ type: CreatedApiKeyResponseDto })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner, 'api_key/limit_reached')
  create(@CurrentDashboard() s: DashboardPrincipal, @Body() body: CreateApiKeyRequestDto): Promise<Omit<ApiKeyResponse, 'revoked_at'> & { key: string }> {
    return this.commandBus.execute(new CreateApiKeyCommand(s, body.name));
  }

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'List API keys (newest first, cursor-paginated)' })
  @ApiPageResponse(ApiKeyResponseDto)
  @ApiProblems(...Problems.dashboardRead, ...Problems.list, ...Problems.tenant)
  list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListApiKeysQueryDto): Promise<Page<ApiKeyResponse>> {
    return this.queryBus.execute(new ListApiKeysQuery(s.tenant!.id, q.limit ?? 20, q.cursor));
  }

  @Delete(':id')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOperation({ summary: 'Revoke an API key (owner); idempotent' })
  @ApiOkResponse({ type: RevokedApiKeyResponseDto })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'api_key/not_found')
  revoke(@CurrentDashboard() s: DashboardPrincipal, @UuidParam('id', 'api_key/not_found') id: string): Promise<{ id: string; revoked_at: string }> {
    return this.commandBus.execute(new RevokeApiKeyCommand(s, id));
  }
}
