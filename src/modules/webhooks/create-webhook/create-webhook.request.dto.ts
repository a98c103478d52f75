import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayMinSize, ArrayUnique, IsArray, IsIn, IsOptional, IsString, IsUUID } from 'class-validator';
import { MaxLength } from '../../../shared/http/lengths';
import { ALL_EVENTS, WEBHOOK_EVENT_TYPES } from '../webhook-events';
import { MAX_URL_LENGTH } from '../url-policy';

const EVENT_CHOICES = [...WEBHOOK_EVENT_TYPES, ALL_EVENTS];

/** Contract "Agents and OAuth": `{url, events[], agent_client_id?}`. */
export class CreateWebhookRequestDto {
  @ApiProperty({
    format: 'uri',
    minLength: 1,
    maxLength: MAX_URL_LENGTH,
    example: 'https://example.com/hooks/authp',
    description:
      'at most 2048 characters, also once percent-encoded as it is stored and answered (a non-ASCII character takes up to 12 there); ' +
      'https only in production, and the host must not resolve to a loopback, private, link-local or reserved address (checked now and at every delivery); under NODE_ENV development or test, loopback URLs (http or https) are allowed. No credentials, no fragment.',
  })
  @IsString()
  @MaxLength(MAX_URL_LENGTH)
  url!: string;

  @ApiProperty({
    type: [String],
    enum: EVENT_CHOICES,
    minItems: 1,
    uniqueItems: true,
    description: 'event types to receive (spec 6 plus `user.claimed` and `user.deleted`); `*` alone subscribes to every event type, including future ones',
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(EVENT_CHOICES.length)
  @ArrayUnique()
  @IsIn(EVENT_CHOICES, { each: true })
  events!: string[];

  @ApiPropertyOptional({
    format: 'uuid',
    nullable: true,
    type: String,
    description: "only events whose payload's agent_client_id is this agent client of the tenant (spec 6); events without one are not sent",
  })
  @IsOptional()
  @IsUUID()
  agent_client_id?: string | null;
}
