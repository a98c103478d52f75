import { Module } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { CacheModule } from './cache/cache.module';
import { ConfigModule } from '../config/config.module';
import { AuthKernelModule } from './auth/auth.module';
import { CryptoModule } from './crypto/crypto.module';
import { DbModule } from './db/db.module';
import { EventsModule } from './events/events.module';
import { RateLimitModule } from './rate-limit/rate-limit.module';
import { RedisModule } from './redis/redis.module';
import { MailModule } from './mail/mail.module';

/** The shared kernel both processes (API and worker) stand on. */
@Module({
  imports: [ConfigModule, DbModule, RedisModule, CryptoModule, EventsModule, RateLimitModule, AuthKernelModule, MailModule, CacheModule, CqrsModule.forRoot()],
  exports: [ConfigModule, DbModule, RedisModule, CryptoModule, EventsModule, RateLimitModule, AuthKernelModule, MailModule, CacheModule, CqrsModule],
})
export class KernelModule {}
