import { Controller, Get, Header, Inject } from '@nestjs/common';
import { ApiExcludeEndpoint, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import Redis from 'ioredis';
import { Db } from '../db/db.service';
import { REDIS } from '../redis/redis.module';
import { metricsRegistry } from './metrics';

/** Operations: liveness, readiness (PostgreSQL and Redis reachable), Prometheus metrics. */
@ApiTags('operations')
@Controller()
export class OpsController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicator: HealthIndicatorService,
    private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  @Get('health')
  health_(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([
      async () => {
        const i = this.indicator.check('postgres');
        try {
          await this.db.query('SELECT 1');
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
  @ApiExcludeEndpoint()
  @Header('Content-Type', 'text/plain; version=0.0.4')
  metrics(): Promise<string> {
    return metricsRegistry.metrics();
  }
}
