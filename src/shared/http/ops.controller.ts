import { Controller, Get, Header, Headers, Inject, Logger, OnModuleInit, ServiceUnavailableException } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { Db } from '../db/db.service';
import { AppError } from '../errors/app-error';
import { unavailableDetail } from '../errors/problem';
import { REDIS } from '../redis/redis.module';
import { ApiProblemResponse } from './api-docs';
import { metricsText } from './metrics';
import { assertMetricsReader } from './metrics-reader';
import { OutboxMetrics } from './outbox-metrics';

const INDICATORS = {
  type: 'object',
  additionalProperties: { type: 'object', required: ['status'], properties: { status: { type: 'string', enum: ['up', 'down'] }, message: { type: 'string' } } },
  example: { postgres: { status: 'up' }, redis: { status: 'up' } },
};

/** How long /ready waits for PostgreSQL's answer to SELECT 1, the wait for a connection included. */
const READY_QUERY_TIMEOUT_MS = 2_000;

/** Operations: liveness, readiness (PostgreSQL and Redis reachable), Prometheus metrics. */
@ApiTags('operations')
@Controller()
export class OpsController implements OnModuleInit {
  private readonly outbox = new OutboxMetrics();

  constructor(
    private readonly health: HealthCheckService,
    private readonly indicator: HealthIndicatorService,
    private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    if (this.config.isProduction && this.config.METRICS_ENABLED && !this.config.METRICS_TOKEN) {
      new Logger(OpsController.name).warn('GET /metrics answers anyone: set METRICS_TOKEN, or keep /metrics off the public network');
    }
  }

  @Get('health')
  @ApiOperation({ summary: 'Liveness: the process is up' })
  @ApiOkResponse({ schema: { type: 'object', required: ['status'], properties: { status: { type: 'string', enum: ['ok'] } } } })
  health_(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  // the same no-cache header as the default; documented below instead of terminus' schema (a failure is problem+json here)
  @HealthCheck({ noCache: true, swaggerDocumentation: false })
  @ApiOperation({ summary: 'Readiness: PostgreSQL and Redis reachable' })
  @ApiOkResponse({
    schema: {
      type: 'object',
      required: ['status', 'info', 'error', 'details'],
      properties: { status: { type: 'string', enum: ['ok'] }, info: INDICATORS, error: { type: 'object' }, details: INDICATORS },
    },
  })
  @ApiProblemResponse(503, 'server/unavailable', 'PostgreSQL or Redis is unreachable: problem+json with status 503, code `server/unavailable` and the unreachable ones in `detail`')
  async ready() {
    try {
      return await this.checkStores();
    } catch (e) {
      // logged by ReadinessLogger (a warning, once a minute at most), not as a server error per probe
      if (e instanceof ServiceUnavailableException) throw new AppError('server/unavailable', unavailableDetail(e), { logged: true });
      throw e;
    }
  }

  private checkStores() {
    return this.health.check([
      async () => {
        const i = this.indicator.check('postgres');
        try {
          // a probe answers within seconds: a PostgreSQL that does not answer within 2 s, the wait
          // for the connection included, fails it. On the probes' own connection (Db.ping): a main
          // pool whose connections the requests all hold is busy, not unreachable
          await this.db.ping(READY_QUERY_TIMEOUT_MS);
          return i.up();
        } catch (e) {
          return i.down({ message: (e as Error).message });
        }
      },
      async () => {
        const i = this.indicator.check('redis');
        try {
          await this.redis.ping();
          return i.up();
        } catch (e) {
          return i.down({ message: (e as Error).message });
        }
      },
    ]);
  }

  @Get('metrics')
  @ApiOperation({
    summary: 'Prometheus metrics (text exposition format 0.0.4)',
    description:
      'For the scraper: with METRICS_TOKEN set, only `Authorization: Bearer <METRICS_TOKEN>` is answered (401 otherwise); with METRICS_ENABLED=false the route answers 404 as an unknown path. Keep it off the public network.',
  })
  @ApiProduces('text/plain')
  @ApiHeader({ name: 'authorization', required: false, description: '`Bearer <METRICS_TOKEN>`: needed only when METRICS_TOKEN is set' })
  @ApiOkResponse({ description: 'the metrics of the API (with API_WORKERS>1, every API process summed)', content: { 'text/plain': { schema: { type: 'string' } } } })
  @ApiProblemResponse(401, 'auth/unauthorized', 'METRICS_TOKEN is set and the request does not carry it as a bearer token', '`Bearer realm="metrics"`')
  @ApiProblemResponse(404, 'request/not_found', 'METRICS_ENABLED=false')
  @Header('Content-Type', 'text/plain; version=0.0.4')
  async metrics(@Headers('authorization') authorization?: string): Promise<string> {
    // METRICS_ENABLED=false: no metrics at all, the route included (it answers as an unknown path)
    if (!this.config.METRICS_ENABLED) throw new AppError('request/not_found');
    assertMetricsReader(this.config.METRICS_TOKEN, authorization);
    // the worker's backlog (one database: read here, never summed across API processes)
    const [own, outbox] = await Promise.all([metricsText(), this.outbox.text(this.db)]);
    return outbox ? `${own}${own.endsWith('\n') ? '' : '\n'}${outbox}` : own;
  }
}
