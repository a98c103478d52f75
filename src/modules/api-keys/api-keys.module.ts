import { Module } from '@nestjs/common';
import { ApiKeysController } from './api-keys.controller';
import { CreateApiKeyHandler, ListApiKeysHandler, RevokeApiKeyHandler } from './api-keys.handlers';

/** Tenant API keys: create (shown once), list, revoke; only SHA-256 hashes are stored. */
@Module({
  controllers: [ApiKeysController],
  providers: [CreateApiKeyHandler, ListApiKeysHandler, RevokeApiKeyHandler],
})
export class ApiKeysModule {}
