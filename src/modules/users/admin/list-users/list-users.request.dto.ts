import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches } from 'class-validator';
import { MaxLength } from '../../../../shared/http/lengths';
import { CursorQuery } from '../../../../shared/db/pagination';

/** GET .../users: cursor, limit (default 20, max 100) and an optional exact email lookup. */
export class ListUsersRequestDto extends CursorQuery {
  @ApiPropertyOptional({
    maxLength: 254,
    example: 'ada@example.com',
    description: 'find the user with this address, in any spelling the service takes for it (compared by its normalized key: case, Unicode NFKC, IDNA domain); a page of at most one user',
  })
  @IsOptional()
  @IsString()
  @MaxLength(254)
  @Matches(/\S/, { message: 'email must not be blank' })
  email?: string;
}
