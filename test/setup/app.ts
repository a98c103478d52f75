import { randomBytes } from 'crypto';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import { createApiApp } from '../../src/app.factory';
import { withEnv } from './with-env';
import { AgentClientCache } from '../../src/modules/agents/agent-client.cache';
import { ApiKeyCache } from '../../src/shared/cache/api-key.cache';
import { Db } from '../../src/shared/db/db.service';

export interface TestApp {
  app: NestFastifyApplication;
  http: () => ReturnType<typeof request>;
  db: Db;
  /**
   * After a test changed a tenant row with SQL (as an operator would by hand): what the service's
   * own writers do after their commit, so cached API-key principals and agent clients carry the change.
   */
  tenantChanged: (tenantId: string) => Promise<void>;
  close: () => Promise<void>;
}

/** Boots the real API (real PostgreSQL and Redis); `env` overrides configuration for this app. */
export async function createTestApp(env: Record<string, string> = {}): Promise<TestApp> {
  const app = await withEnv(env, async () => {
    let started: Awaited<ReturnType<typeof createApiApp>> | undefined;
    try {
      started = await createApiApp({ logger: false });
      await started.init();
      await started.getHttpAdapter().getInstance().ready();
      return started;
    } catch (e) {
      // an instance that cannot start (a test of boot errors) leaves no connection open behind it
      await started?.close().catch(() => undefined);
      throw e;
    }
  });
  return {
    app,
    http: () => request(app.getHttpServer()),
    db: app.get(Db),
    tenantChanged: async (tenantId) => {
      await app.get(ApiKeyCache).invalidateTenant(app.get(Db), tenantId);
      await app.get(AgentClientCache).invalidateTenant(app.get(Db), tenantId);
    },
    close: () => app.close(),
  };
}

/** A random client address: per-IP limits are keyed on X-Forwarded-For under TRUST_PROXY=loopback. */
export function randomIp(): string {
  const b = randomBytes(3);
  return `10.${b[0]}.${b[1]}.${b[2] || 1}`;
}

export function uniqueEmail(tag = 'user'): string {
  return `${tag}.${randomBytes(5).toString('hex')}@example.com`;
}

export const STRONG_PASSWORD = 'correct horse battery staple';
