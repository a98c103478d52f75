import { Body, Controller, HttpCode, Post, Res } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ClientInfo, ClientInfoValue } from '../../shared/auth/auth-context';
import { DashboardSessionService } from '../../shared/auth/dashboard-session.service';
import { RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
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
  @ApiOperation({ summary: 'Create a tenant, its owner and a dashboard session (spec 2.1)' })
  async signup(@Body() body: SignupRequestDto, @ClientInfo() client: ClientInfoValue, @Res({ passthrough: true }) reply: FastifyReply): Promise<SignupResponse> {
    const r = await this.commandBus.execute(new SignupCommand(body, client));
    if (r.sessionToken) this.sessions.setCookie(reply, r.sessionToken);
    return r.body;
  }
}
