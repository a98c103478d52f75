import { ApiProperty } from '@nestjs/swagger';
import { IsString, Matches } from 'class-validator';
import { MaxLength, MinLength } from '../../../shared/http/lengths';

/** spec 2.2 RefreshTokenRequest */
export class RefreshTokenRequestDto {
  /** the shape is a field constraint (400); a well-shaped token that is not live is 401 auth/invalid_refresh_token */
  @ApiProperty({ minLength: 1, maxLength: 512, pattern: '^[^:\\s]+:[^:\\s]+$', description: 'shape <id>:<secret>' })
  @IsString() @MinLength(1) @MaxLength(512)
  @Matches(/^[^:\s]+:[^:\s]+$/, { message: 'refresh_token must have the shape <id>:<secret>' })
  refresh_token!: string;
}
