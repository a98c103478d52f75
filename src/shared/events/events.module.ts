import { Global, Module } from '@nestjs/common';
import { EventsService } from './events.service';
import { FailureAudit } from './failure-audit';
import { RequestTrail } from './request-trail';

@Global()
@Module({ providers: [EventsService, RequestTrail, FailureAudit], exports: [EventsService, RequestTrail, FailureAudit] })
export class EventsModule {}
