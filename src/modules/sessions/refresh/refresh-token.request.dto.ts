import { ApiProperty } from '@nestjs/swagger';
import { IsString, MaxLength, MinLength } from 'class-validator';

/** spec 2.2 RefreshTokenRequest */
export class RefreshTokenRequestDto {
  @ApiProperty({ minLength: 1, description: 'shape <id>:<secret>' }) @IsString() @MinLength(1) @MaxLength(512) refresh_token!: string;
}
