import { Injectable } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsString, Validate, ValidatorConstraint, ValidatorConstraintInterface } from 'class-validator';
import { MaxLength } from '../../shared/http/lengths';
import { Db, Queryable } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';
import { Present } from '../../shared/http/presence';
import { UUID } from '../../shared/uuid';

/** An absolute URI (RFC 3986 section 4.3: a scheme, no fragment), native-app schemes included. */
@ValidatorConstraint({ name: 'absoluteUri' })
export class AbsoluteUriConstraint implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    if (typeof value !== 'string' || value.length > 2048 || !/^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$/.test(value)) return false;
    try {
      return !new URL(value).hash;
    } catch {
      return false;
    }
  }
  defaultMessage(): string {
    return 'redirect_uri must be an absolute URI without a fragment';
  }
}

/** spec 2.2 oauth_params: the authorization request a passwordless sign-in resumes (optional values may be absent, never null). */
export class OAuthParamsDto {
  // stored with the link or code until it is used: each value bounded
  @ApiProperty({ maxLength: 255 }) @IsString() @MaxLength(255) client_id!: string;
  @ApiProperty({ format: 'uri', maxLength: 2048 }) @IsString() @MaxLength(2048) @Validate(AbsoluteUriConstraint) redirect_uri!: string;
  @ApiPropertyOptional({ maxLength: 64 }) @Present() @IsString() @MaxLength(64) response_type?: string;
  @ApiPropertyOptional({ maxLength: 128, description: 'RFC 7636: at most 128 characters' }) @Present() @IsString() @MaxLength(128) code_challenge?: string;
  @ApiPropertyOptional({ maxLength: 16 }) @Present() @IsString() @MaxLength(16) code_challenge_method?: string;
  @ApiPropertyOptional({ maxLength: 1024 }) @Present() @IsString() @MaxLength(1024) scope?: string;
  @ApiPropertyOptional({ maxLength: 1024 }) @Present() @IsString() @MaxLength(1024) state?: string;
  @ApiPropertyOptional({ maxLength: 1024 }) @Present() @IsString() @MaxLength(1024) nonce?: string;
  @ApiPropertyOptional({ maxLength: 2048 }) @Present() @IsString() @MaxLength(2048) resource?: string;
}

/**
 * Issue 5 item 3: the redirect_uri must be registered for that client (an OAuth client of the
 * same tenant, not revoked), compared as a simple string (RFC 6749 section 3.1.2.3). Checked
 * before the address is looked up: an unregistered URI is 400 and no mail, for any address.
 */
@Injectable()
export class OAuthParamsChecker {
  constructor(private readonly db: Db) {}

  async check(tenantId: string, p: OAuthParamsDto | Record<string, string> | null | undefined, lockIn?: Queryable): Promise<Record<string, string> | null> {
    if (!p) return null;
    const sql = `SELECT redirect_uris FROM oauth_clients WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL`;
    const [client] = !UUID.test(p.client_id)
      ? []
      : lockIn
        ? await lockIn.query<{ redirect_uris: string[] }>(`${sql} FOR SHARE`, [p.client_id, tenantId])
        : await this.db.query<{ redirect_uris: string[] }>(sql, [p.client_id, tenantId], 'oauth_params_client');
    if (!client || !client.redirect_uris.includes(p.redirect_uri)) {
      throw new AppError('oauth_params/invalid_redirect_uri', 'redirect_uri is not registered for this client_id', {
        errors: [{ field: 'oauth_params.redirect_uri', message: 'not registered for this client_id' }],
      });
    }
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(p)) if (typeof v === 'string') out[k] = v;
    return out;
  }

  /**
   * In the transaction that writes a link or code carrying `params` (checked before): the client
   * read again under a share lock. Its revocation (the client's row updated, then the sign-ins
   * under way for it voided) then waits for this write and voids it, or this write sees it revoked
   * (the same 400). Without the lock, a link written just after the voiding signed in and handed
   * the revoked client's redirect_uri back.
   */
  async hold(tx: Queryable, tenantId: string, params: Record<string, string> | null): Promise<void> {
    await this.check(tenantId, params, tx);
  }
}
