import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, Max, Min } from 'class-validator';
import { Present } from '../../../shared/http/presence';

/** Longest overlap of the old secret with the new one: a week (as long as a receiver's change may take). */
export const MAX_PREVIOUS_SECRET_TTL_SECONDS = 7 * 86400;
export const DEFAULT_PREVIOUS_SECRET_TTL_SECONDS = 86400;

export class RotateWebhookSecretRequestDto {
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    maximum: MAX_PREVIOUS_SECRET_TTL_SECONDS,
    default: DEFAULT_PREVIOUS_SECRET_TTL_SECONDS,
    description: 'how long the secret being replaced keeps signing beside the new one (0: it stops at once, e.g. when it leaked)',
  })
  @Present() @IsInt() @Min(0) @Max(MAX_PREVIOUS_SECRET_TTL_SECONDS)
  previous_secret_ttl_seconds?: number;
}
