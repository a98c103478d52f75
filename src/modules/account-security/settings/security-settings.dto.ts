import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsBoolean, IsIn, IsInt, IsString, Matches, Max, Min, ValidateIf } from 'class-validator';
import { Length } from '../../../shared/http/lengths';
import { Nullable, Present } from '../../../shared/http/presence';


export const MFA_POLICIES = ['optional', 'required'] as const;

/** spec 2.8 Tenant security settings (update request): all optional, no extra properties. */
export class UpdateSecuritySettingsDto {
  @ApiPropertyOptional({ enum: MFA_POLICIES, description: 'switching to required starts the grace period now' })
  @Present() @IsIn(MFA_POLICIES)
  mfa_policy?: (typeof MFA_POLICIES)[number];

  @ApiPropertyOptional({ type: 'integer', minimum: 3, maximum: 30 }) @Present() @IsInt() @Min(3) @Max(30) mfa_grace_period_days?: number;

  @ApiPropertyOptional() @Present() @IsBoolean() block_disposable_emails?: boolean;

  @ApiPropertyOptional({ description: 'blocks user+tag style addresses' }) @Present() @IsBoolean() block_email_subaddresses?: boolean;

  @ApiPropertyOptional({ description: 'links a social login with a verified matching email to the existing account' })
  @Present() @IsBoolean()
  automatic_account_linking_enabled?: boolean;

  @ApiPropertyOptional({ description: 'lets end users request linking an additional social provider' })
  @Present() @IsBoolean()
  explicit_account_linking_enabled?: boolean;

  @ApiPropertyOptional() @Present() @IsBoolean() sms_otp_enabled?: boolean;

  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 100000 }) @Present() @IsInt() @Min(0) @Max(100000) sms_otp_monthly_cap?: number;

  @ApiPropertyOptional({ type: String, nullable: true, pattern: '^AC[a-f0-9]{32}$', description: 'null clears' })
  @Nullable() @IsString() @Matches(/^AC[a-f0-9]{32}$/, { message: 'byok_twilio_account_sid must match ^AC[a-f0-9]{32}$' })
  byok_twilio_account_sid?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true, minLength: 32, maxLength: 128, description: 'write-only: stored envelope-encrypted, never returned; null clears' })
  @Nullable() @IsString() @Length(32, 128)
  byok_twilio_auth_token?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true, pattern: '^MG[a-f0-9]{32}$', description: 'null clears' })
  @Nullable() @IsString() @Matches(/^MG[a-f0-9]{32}$/, { message: 'byok_twilio_messaging_service_sid must match ^MG[a-f0-9]{32}$' })
  byok_twilio_messaging_service_sid?: string | null;

  @ApiPropertyOptional() @Present() @IsBoolean() magic_link_enabled?: boolean;

  @ApiPropertyOptional() @Present() @IsBoolean() email_otp_enabled?: boolean;

  @ApiPropertyOptional({ type: 'array', items: { type: 'string', pattern: '^[A-Z]{2}$' }, nullable: true, maxItems: 300, description: 'ISO 3166-1 alpha-2, uppercase (lowercase is refused); a repeated entry is stored once; null or [] clears the narrowing' })
  @Nullable() @IsArray() @ArrayMaxSize(300) @IsString({ each: true })
  @Matches(/^[A-Z]{2}$/, { each: true, message: 'each sms_allowed_countries entry must be exactly 2 uppercase letters (^[A-Z]{2}$)' })
  sms_allowed_countries?: string[] | null;
}

/** The tenant's security settings as read back (the BYOK auth token only as a flag). */
export class SecuritySettingsResponse {
  @ApiProperty({ enum: MFA_POLICIES }) mfa_policy!: 'optional' | 'required';
  @ApiProperty({ type: 'integer' }) mfa_grace_period_days!: number;
  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: 'when mfa_policy last became required (read-only)' })
  mfa_required_since!: string | null;
  @ApiProperty() block_disposable_emails!: boolean;
  @ApiProperty() block_email_subaddresses!: boolean;
  @ApiProperty() automatic_account_linking_enabled!: boolean;
  @ApiProperty() explicit_account_linking_enabled!: boolean;
  @ApiProperty() sms_otp_enabled!: boolean;
  @ApiProperty({ type: 'integer' }) sms_otp_monthly_cap!: number;
  @ApiProperty({ type: String, nullable: true }) byok_twilio_account_sid!: string | null;
  @ApiProperty({ description: 'whether a BYOK auth token is stored (the token itself is never returned)' }) byok_twilio_auth_token_set!: boolean;
  @ApiProperty({ type: String, nullable: true }) byok_twilio_messaging_service_sid!: string | null;
  @ApiProperty() magic_link_enabled!: boolean;
  @ApiProperty() email_otp_enabled!: boolean;
  @ApiProperty({ description: 'email code requests need a captcha_token (read-only here; the operator CLI tenants:email-otp-captcha sets it)' }) email_otp_captcha_required!: boolean;
  @ApiProperty({ description: 'registration requires a date_of_birth (read-only here; the operator CLI tenants:minor-protection sets it)' }) minor_protection_enabled!: boolean;
  @ApiProperty({ type: [String], nullable: true }) sms_allowed_countries!: string[] | null;
}

/** spec PutEmailDomainsRequest */
export class PutEmailDomainsDto {
  @ApiPropertyOptional({ type: 'array', items: { type: 'string', minLength: 1, maxLength: 253 }, maxItems: 100, default: [], description: 'each 1-253 characters, a domain name (labels of 1-63 characters; internationalized names counted in their ASCII form); a domain covers its subdomains; stored lower-case' })
  @Present() @IsArray() @ArrayMaxSize(100) @IsString({ each: true }) @Length(1, 253, { each: true })
  allowlist?: string[];

  @ApiPropertyOptional({ type: 'array', items: { type: 'string', minLength: 1, maxLength: 253 }, maxItems: 100, default: [], description: 'each 1-253 characters, a domain name (labels of 1-63 characters; internationalized names counted in their ASCII form); a domain covers its subdomains; stored lower-case' })
  @Present() @IsArray() @ArrayMaxSize(100) @IsString({ each: true }) @Length(1, 253, { each: true })
  blocklist?: string[];
}

export class EmailDomainsResponse {
  @ApiProperty({ type: [String] }) allowlist!: string[];
  @ApiProperty({ type: [String] }) blocklist!: string[];
}

/** spec UpdateTenantPasskeyDomainRequest: the key is required, null clears it. */
export class PutPasskeyDomainDto {
  @ApiProperty({
    type: String,
    nullable: true,
    minLength: 1,
    maxLength: 253,
    pattern: '^[a-z0-9.-]+$',
    description:
      'WebAuthn relying-party id of the tenant: a registrable domain or a name under one (not a public suffix, not an IP address; localhost outside production); null clears it',
  })
  @ValidateIf((_o, v) => v !== null) @IsString() @Length(1, 253)
  @Matches(/^[a-z0-9.-]+$/, { message: 'passkey_rp_id must match ^[a-z0-9.-]+$ (lower-case letters, digits, dots and hyphens)' })
  passkey_rp_id!: string | null;
}

export class PasskeyDomainResponse {
  @ApiProperty({ type: String, nullable: true, description: 'the relying-party id set by the tenant, or null' }) passkey_rp_id!: string | null;
  @ApiProperty({ description: 'the relying-party id passkey ceremonies use: passkey_rp_id, else the host of ACCOUNTS_URL' }) effective_rp_id!: string;
}

/** An RFC 6749 section 3.3 scope-token: printable ASCII but space, `"` and `\`. */
export const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/;

/** The scopes of the tenant's user tokens (contract "Tokens": `user_scopes`). */
export class PutUserScopesDto {
  @ApiProperty({
    type: 'array',
    items: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+$' },
    minItems: 1,
    maxItems: 50,
    example: ['openid', 'profile', 'email', 'orders:read'],
    description: 'every scope-token (RFC 6749 section 3.3) the tenant\'s user access tokens carry in `scope`; a repeated entry is stored once. Token exchange narrows an agent token to requested ∩ this ∩ the agent\'s allowlist',
  })
  @IsArray() @ArrayMinSize(1) @ArrayMaxSize(50) @IsString({ each: true })
  @Matches(SCOPE_TOKEN, { each: true, message: 'each user_scopes entry must be a scope-token: 1-128 printable ASCII characters, no space, " or \\' })
  user_scopes!: string[];
}

export class UserScopesResponse {
  @ApiProperty({ type: [String], example: ['openid', 'profile', 'email'] }) user_scopes!: string[];
}
