import { Global, Module } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { createDataSource } from './data-source';
import { DATA_SOURCE, Db } from './db.service';
import { assertSchemaCurrent } from './schema-version';
import { IdempotencyService } from './idempotency';

@Global()
@Module({
  providers: [
    {
      provide: DATA_SOURCE,
      inject: [APP_CONFIG],
      useFactory: async (config: AppConfig) => {
        const ds = await createDataSource(config).initialize();
        try {
          await assertSchemaCurrent(ds);
        } catch (err) {
          await ds.destroy();
          throw err;
        }
        return ds;
      },
    },
    Db,
    IdempotencyService,
  ],
  exports: [Db, DATA_SOURCE, IdempotencyService],
})
export class DbModule {}
