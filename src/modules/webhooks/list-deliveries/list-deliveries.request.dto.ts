import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional } from 'class-validator';
import { CursorQuery } from '../../../shared/db/pagination';

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** `?cursor&limit` (default 20, max 100) and an optional `status` filter. */
export class ListDeliveriesQueryDto extends CursorQuery {
  @ApiPropertyOptional({ enum: DELIVERY_STATUSES }) @IsOptional() @IsIn(DELIVERY_STATUSES) status?: DeliveryStatus;
}
