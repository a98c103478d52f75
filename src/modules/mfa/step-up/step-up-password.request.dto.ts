import { ApiProperty } from '@nestjs/swagger';
import { IsString } from 'class-validator';
import { CURRENT_PASSWORD_LENGTH_DOC, CurrentPasswordLength } from '../../../shared/http/lengths';

/** spec 2.5 StepUpPasswordRequest */
export class StepUpPasswordRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 256, description: CURRENT_PASSWORD_LENGTH_DOC })
  @IsString()
  @CurrentPasswordLength(1, 256)
  password!: string;
}
