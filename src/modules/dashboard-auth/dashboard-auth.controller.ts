import { Body, Controller, Delete, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ClientInfo, ClientInfoValue, CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardSessionService } from '../../shared/auth/dashboard-session.service';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { ApiProblems, Problems } from '../../shared/http/api-docs';
import { PASSWORD_PROOF_PER_IP, RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
import {
  AcceptInviteRequestDto,
  DashboardLoginRequestDto,
  DashboardReauthRequestDto,
  DashboardSessionResponse,
  InviteMemberRequestDto,
} from './dashboard-auth.dto';
import { DashboardReauthResponseDto, DashboardSessionResponseDto, InviteMemberResponseDto } from './dashboard-auth.response.dto';
import { DeleteDashboardAccountCommand } from './delete-account/delete-account.command';
import { AcceptInviteCommand, InviteMemberCommand } from './invites/invite-member.command';
import { DashboardLoginCommand } from './login/dashboard-login.command';
import { DashboardLogoutCommand } from './logout/dashboard-logout.command';
import { DashboardReauthCommand } from './reauth.handler';

@ApiTags('dashboard')
@Controller('v1/auth/dashboard')
export class DashboardAuthController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly sessions: DashboardSessionService,
  ) {}

  @Post('login')
  @HttpCode(200)
  @RateLimit({ bucket: 'dashboard-login', by: 'ip', limit: (c) => c.RATE_LIMIT_LOGIN_PER_IP_PER_MIN, windowSeconds: 60 })
  @ApiOperation({ summary: 'Dashboard sign-in (spec 2.7); sets the session cookie' })
  @ApiOkResponse({ type: DashboardSessionResponseDto, headers: { 'Set-Cookie': { description: 'the dashboard session cookie (HttpOnly, SameSite=Lax)', schema: { type: 'string' } } } })
  @ApiProblems(...Problems.input, 'auth/invalid_credentials', 'auth/login_throttled', ...Problems.rateLimited)
  async login(@Body() body: DashboardLoginRequestDto, @ClientInfo() client: ClientInfoValue, @Res({ passthrough: true }) reply: FastifyReply): Promise<DashboardSessionResponse> {
    const r = await this.commandBus.execute(new DashboardLoginCommand(body.email, body.password, client));
    this.sessions.setCookie(reply, r.sessionToken);
    return r.body;
  }

  @Post('logout')
  @HttpCode(204)
  @DashboardAuth()
  @ApiOperation({ summary: 'End the dashboard session server-side' })
  @ApiNoContentResponse({ description: 'the session ended; the cookie is cleared' })
  @ApiProblems(...Problems.dashboardWrite)
  async logout(@CurrentDashboard() session: DashboardPrincipal, @ClientInfo() client: ClientInfoValue, @Res({ passthrough: true }) reply: FastifyReply): Promise<void> {
    await this.commandBus.execute(new DashboardLogoutCommand(session, client));
    this.sessions.clearCookie(reply);
  }

  @Get('me')
  @DashboardAuth()
  @ApiOperation({ summary: 'The signed-in dashboard user, memberships and CSRF token' })
  @ApiOkResponse({ type: DashboardSessionResponseDto })
  @ApiProblems(...Problems.dashboardRead)
  me(@CurrentDashboard() s: DashboardPrincipal): DashboardSessionResponse {
    return {
      user: { id: s.userId, email: s.email },
      memberships: s.memberships.map((m) => ({ tenant_id: m.tenant_id, tenant_slug: m.tenant_slug, role: m.role })),
      csrf_token: s.csrfToken,
    };
  }

  @Delete('me')
  @HttpCode(204)
  @DashboardAuth({ reauth: true })
  @ApiOperation({
    summary: 'Delete the signed-in dashboard account (GDPR Art. 17), after a reauth; clears the cookie',
    description:
      'Refused with 409 member/last_owner while the account is the last owner of a tenant (the tenants\' slugs in `tenant_slugs` and the detail): ' +
      'make another member an owner there first. Otherwise, in one transaction, the account leaves every tenant (its pending invitations withdrawn; ' +
      'audited dashboard.member_left per tenant, `reason: account_deleted`), every session of the account ends (the old cookie is 401) and the account ' +
      '(address, password hash, consents) is deleted; API keys, agents, webhooks and invitations it created keep no reference to it. Audited ' +
      'dashboard.account_deleted (ids and counts, never the address). The address can then sign up or be invited again as a new account. ' +
      'A second DELETE of the same account (sent in parallel) answers 401: its session went with the account.',
  })
  @ApiNoContentResponse({ description: 'the account is deleted; the cookie is cleared' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, 'member/last_owner')
  async deleteAccount(@CurrentDashboard() session: DashboardPrincipal, @ClientInfo() client: ClientInfoValue, @Res({ passthrough: true }) reply: FastifyReply): Promise<void> {
    await this.commandBus.execute(new DeleteDashboardAccountCommand(session, client));
    this.sessions.clearCookie(reply);
  }

  @Post('reauth')
  @HttpCode(200)
  @RateLimit(PASSWORD_PROOF_PER_IP)
  @DashboardAuth()
  @ApiOperation({ summary: 'Confirm the password for sensitive actions (spec 2.7)' })
  @ApiOkResponse({ type: DashboardReauthResponseDto })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.input, 'auth/invalid_credentials', 'auth/login_throttled', ...Problems.rateLimited)
  reauth(@CurrentDashboard() s: DashboardPrincipal, @Body() body: DashboardReauthRequestDto, @ClientInfo() client: ClientInfoValue): Promise<{ verified_at: string }> {
    return this.commandBus.execute(new DashboardReauthCommand(s, body.password, client));
  }

  @Post('tenants/:slug/members')
  @HttpCode(201)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({
    summary: 'Invite a member (owner only); the token is also emailed',
    description:
      'One pending invitation per (tenant, address): inviting an address again replaces its pending invitation (new token, role and expiry; ' +
      'the earlier token is refused with 400 invite/invalid). Invitation mails are limited per invited address, all tenants together ' +
      '(RATE_LIMIT_INVITES_PER_ADDRESS_PER_HOUR, default 3 per hour), and per tenant (RATE_LIMIT_INVITES_PER_TENANT_PER_DAY, default 100 per day): ' +
      'beyond either, 429 rate_limit/exceeded with Retry-After, nothing is sent. A member already (409) or a refused address (422) counts in neither.',
  })
  @ApiCreatedResponse({ type: InviteMemberResponseDto })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner, 'member/exists', ...Problems.emailPolicy)
  invite(@Param('slug') _slug: string, @CurrentDashboard() s: DashboardPrincipal, @Body() body: InviteMemberRequestDto): Promise<{ invite_token: string }> {
    return this.commandBus.execute(new InviteMemberCommand(s, body.email, body.role));
  }

  @Post('invites/accept')
  @HttpCode(200)
  @RateLimit({ bucket: 'invite-accept', by: 'ip', limit: (c) => c.RATE_LIMIT_SIGNUP_PER_MIN * 4, windowSeconds: 60 })
  @ApiOperation({
    summary: 'Accept an invitation; answers as login',
    description:
      'An existing dashboard account accepts with its own password; `user.email` is the account\'s email as stored. An account that is already a member of ' +
      'the tenant (e.g. another invitation for the same address was accepted first) gets 409 member/exists and the invitation stays unused: an invitation ' +
      'never changes the role of a member (so it can never demote an owner).',
  })
  @ApiOkResponse({ type: DashboardSessionResponseDto, headers: { 'Set-Cookie': { description: 'the dashboard session cookie (HttpOnly, SameSite=Lax)', schema: { type: 'string' } } } })
  @ApiProblems(...Problems.input, 'invite/invalid', 'auth/invalid_credentials', 'auth/login_throttled', 'member/exists', ...Problems.emailPolicy, ...Problems.rateLimited)
  async accept(@Body() body: AcceptInviteRequestDto, @ClientInfo() client: ClientInfoValue, @Res({ passthrough: true }) reply: FastifyReply): Promise<DashboardSessionResponse> {
    const r = await this.commandBus.execute(new AcceptInviteCommand(body.token, body.password, client));
    this.sessions.setCookie(reply, r.sessionToken);
    return r.body;
  }
}
