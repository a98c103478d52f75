import { Global, Module } from '@nestjs/common';
import { APP_CONFIG, AppConfig, loadConfig } from './config';

let cached: AppConfig | undefined;
/** The process-wide config, validated once. */
export function getConfig(): AppConfig {
  return (cached ??= loadConfig());
}
/** Tests set environment variables before creating an app; this drops the cached config. */
export function resetConfigForTests(): void {
  cached = undefined;
}

@Global()
@Module({
  providers: [{ provide: APP_CONFIG, useFactory: getConfig }],
  exports: [APP_CONFIG],
})
export class ConfigModule {}
