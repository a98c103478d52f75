import { Global, Module } from '@nestjs/common';
import { EventsService } from './events.service';
import { RequestTrail } from './request-trail';

@Global()
@Module({ providers: [EventsService, RequestTrail], exports: [EventsService, RequestTrail] })
export class EventsModule {}
