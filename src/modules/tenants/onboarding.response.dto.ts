import { ApiProperty } from '@nestjs/swagger';
import { SignupResponse } from './signup/signup.command';

// OpenAPI documentation of the signup answer; the handler answers the interface.

export class SignupTenantDto {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty() slug!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ example: 'free', description: 'free, pro or enterprise (new tenants start on free)' }) tier!: string;
}

export class SignupUserDto {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'email' }) email!: string;
}

/** 201 `{tenant, user, csrf_token}` plus the dashboard session cookie. */
export class SignupResponseDto implements SignupResponse {
  @ApiProperty({ type: SignupTenantDto }) tenant!: SignupTenantDto;
  @ApiProperty({ type: SignupUserDto }) user!: SignupUserDto;
  @ApiProperty({ description: 'send as X-CSRF-Token on state-changing dashboard requests' }) csrf_token!: string;
}
