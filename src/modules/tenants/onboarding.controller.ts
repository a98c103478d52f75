import { Body, Controller, HttpCode, Post, Res } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ClientInfo, ClientInfoValue } from '../../shared/auth/auth-context';
import { DashboardSessionService } from '../../shared/auth/dashboard-session.service';
import { ApiProblems, Problems } from '../../shared/http/api-docs';
import { RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
import { SignupResponseDto } from './onboarding.response.dto';
import { SignupCommand, SignupResponse } from './signup/signup.command';
import { SignupRequestDto } from './signup/signup.request.dto';

@ApiTags('onboarding')
@Controller('v1/onboarding')
export class OnboardingController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly sessions: DashboardSessionService,
  ) {}

  @Post('signup')
  @HttpCode(201)
  @RateLimit({ bucket: 'signup', by: 'ip', limit: (c) => c.RATE_LIMIT_SIGNUP_PER_MIN, windowSeconds: 60 })
  @ApiOperation({
    summary: 'Create a tenant, its owner and a dashboard session (spec 2.1)',
    description: 'The same idempotency_key again answers the same body and creates nothing twice (another request body with it: 409 idempotency/conflict).',
  })
  @ApiCreatedResponse({
    type: SignupResponseDto,
    description: 'the new tenant (tier free), its owner and the CSRF token',
    headers: { 'Set-Cookie': { description: 'the dashboard session cookie (HttpOnly, SameSite=Lax)', schema: { type: 'string' } } },
  })
  @ApiProblems(...Problems.input, 'onboarding/bot_check_failed', 'onboarding/email_exists', 'idempotency/conflict', 'auth/login_throttled', ...Problems.rateLimited)
  async signup(@Body() body: SignupRequestDto, @ClientInfo() client: ClientInfoValue, @Res({ passthrough: true }) reply: FastifyReply): Promise<SignupResponse> {
    const r = await this.commandBus.execute(new SignupCommand(body, client));
    if (r.sessionToken) this.sessions.setCookie(reply, r.sessionToken);
    return r.body;
  }
}
