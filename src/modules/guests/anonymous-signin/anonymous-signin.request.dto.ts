import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsObject, Validate, ValidatorConstraint, ValidatorConstraintInterface } from 'class-validator';
import { Present } from '../../../shared/http/presence';

export const PUBLIC_METADATA_MAX_BYTES = 4096;

@ValidatorConstraint({ name: 'jsonSize' })
class JsonSizeConstraint implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return Buffer.byteLength(JSON.stringify(value ?? {})) <= PUBLIC_METADATA_MAX_BYTES;
  }
  defaultMessage(): string {
    return `public_metadata must be at most ${PUBLIC_METADATA_MAX_BYTES} bytes of JSON`;
  }
}

/** spec 2.2 AnonymousSigninRequest */
export class AnonymousSigninRequestDto {
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: 'free-form, returned by /v1/auth/me (max 4 KiB)' })
  // kept as parsed: class-transformer's copy would drop keys such as `toString` or `constructor`
  @Transform(({ obj }) => (obj as { public_metadata?: unknown }).public_metadata)
  @Present()
  @IsObject()
  @Validate(JsonSizeConstraint)
  public_metadata?: Record<string, unknown>;
}

/** spec 2.3: exactly these fields. */
export interface AnonymousSigninResponse {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  token_type: 'Bearer';
  user: { id: string; is_anonymous: true; created_at: string };
}
