import { Global, Module } from '@nestjs/common';
import { UserProfileCache } from './user-profile.cache';

@Global()
@Module({ providers: [UserProfileCache], exports: [UserProfileCache] })
export class CacheModule {}
