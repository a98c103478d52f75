import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { Page } from '../../shared/db/pagination';
import { AppError } from '../../shared/errors/app-error';
import { ApiKeyResponse, CreateApiKeyRequestDto, ListApiKeysQueryDto } from './api-keys.dto';
import { CreateApiKeyCommand, ListApiKeysQuery, RevokeApiKeyCommand } from './api-keys.handlers';

/** An unknown or malformed id is the same 404 as another tenant's. */
export const UuidParam = (name: string, code: 'api_key/not_found' | 'request/not_found' = 'request/not_found') =>
  Param(name, new ParseUUIDPipe({ exceptionFactory: () => new AppError(code) }));

@ApiTags('dashboard')
@Controller('v1/auth/dashboard/tenants/:slug/api-keys')
export class ApiKeysController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Post()
  @HttpCode(201)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOperation({ summary: 'Create an API key (owner); `key` is shown once, only its hash is stored' })
  create(@CurrentDashboard() s: DashboardPrincipal, @Body() body: CreateApiKeyRequestDto): Promise<Omit<ApiKeyResponse, 'revoked_at'> & { key: string }> {
    return this.commandBus.execute(new CreateApiKeyCommand(s, body.name));
  }

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'List API keys (newest first, cursor-paginated)' })
  list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListApiKeysQueryDto): Promise<Page<ApiKeyResponse>> {
    return this.queryBus.execute(new ListApiKeysQuery(s.tenant!.id, q.limit ?? 20, q.cursor));
  }

  @Delete(':id')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOperation({ summary: 'Revoke an API key (owner); idempotent' })
  revoke(@CurrentDashboard() s: DashboardPrincipal, @UuidParam('id', 'api_key/not_found') id: string): Promise<{ id: string; revoked_at: string }> {
    return this.commandBus.execute(new RevokeApiKeyCommand(s, id));
  }
}
