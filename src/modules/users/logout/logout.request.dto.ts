import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional } from 'class-validator';

export const LOGOUT_SCOPES = ['local', 'global', 'others'] as const;
export type LogoutScope = (typeof LOGOUT_SCOPES)[number];

/** `POST /v1/auth/logout?scope=...`, as Supabase Auth's: which of the user's sessions end. */
export class LogoutQueryDto {
  @ApiPropertyOptional({
    enum: LOGOUT_SCOPES,
    default: 'local',
    description: '`local`: this session; `global`: every session of the user, this one included; `others`: every session but this one',
  })
  @IsOptional()
  @IsIn(LOGOUT_SCOPES)
  scope?: LogoutScope;
}
