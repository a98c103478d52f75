import { Global, Module } from '@nestjs/common';
import { ApiKeyCache } from './api-key.cache';
import { UserProfileCache } from './user-profile.cache';

@Global()
@Module({ providers: [UserProfileCache, ApiKeyCache], exports: [UserProfileCache, ApiKeyCache] })
export class CacheModule {}
