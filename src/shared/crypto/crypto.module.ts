import { Global, Module } from '@nestjs/common';
import { ClientHasher } from './client-hash';
import { EnvelopeCipher } from './envelope-cipher';
import { JwtService } from './jwt.service';
import { PasswordHasher } from './password-hasher';
import { SigningKeysService } from './signing-keys.service';

@Global()
@Module({
  providers: [ClientHasher, EnvelopeCipher, PasswordHasher, SigningKeysService, JwtService],
  exports: [ClientHasher, EnvelopeCipher, PasswordHasher, SigningKeysService, JwtService],
})
export class CryptoModule {}
