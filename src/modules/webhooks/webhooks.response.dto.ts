import { ApiProperty } from '@nestjs/swagger';
import { WebhookDeliveryResponse } from './webhook-endpoint.entity';

// OpenAPI documentation only: the delivery log row with its counters typed as integers.

export class WebhookDeliveryResponseDto extends WebhookDeliveryResponse {
  @ApiProperty({ type: 'integer', minimum: 0, description: 'attempts made so far' }) declare attempts: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'HTTP status of the last attempt (null: no response)' }) declare last_status_code: number | null;
}
