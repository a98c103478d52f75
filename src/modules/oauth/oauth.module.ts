import { Module, OnModuleInit } from '@nestjs/common';
import { TokenRevocationService } from '../../shared/auth/token-revocation.service';
import { AgentsModule } from '../agents/agents.module';
import { SessionsModule } from '../sessions/sessions.module';
import { AccessTokenReader } from './access-token-reader';
import { ClientAuthenticator } from './client-auth/client-authenticator.service';
import { IntrospectTokenHandler } from './introspect/introspect-token.handler';
import { JtiRevocationSource } from './jti-revocation.source';
import { OAuthController } from './oauth.controller';
import { RevokeTokenHandler } from './revoke/revoke-token.handler';
import { ExchangeTokenHandler } from './token-exchange/exchange-token.handler';
import { SubjectTokenValidator } from './token-exchange/subject-token';
import { WellKnownController } from './well-known.controller';

/** OAuth endpoints: discovery, token exchange (RFC 8693), introspection (RFC 7662), revocation (RFC 7009). */
@Module({
  imports: [AgentsModule, SessionsModule],
  controllers: [WellKnownController, OAuthController],
  providers: [ClientAuthenticator, SubjectTokenValidator, AccessTokenReader, ExchangeTokenHandler, IntrospectTokenHandler, RevokeTokenHandler, JtiRevocationSource],
})
export class OAuthModule implements OnModuleInit {
  constructor(
    private readonly revocation: TokenRevocationService,
    private readonly jti: JtiRevocationSource,
  ) {}

  onModuleInit(): void {
    // RFC 7009: an access token revoked by jti is refused until it expires
    this.revocation.register(this.jti);
  }
}
