import { ApiProperty } from '@nestjs/swagger';
import { IsString } from 'class-validator';
import { Length } from '../../../shared/http/lengths';

/** spec 2.5 StepUpPasswordRequest */
export class StepUpPasswordRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 256 })
  @IsString()
  @Length(1, 256)
  password!: string;
}
