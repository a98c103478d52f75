import { Global, Module } from '@nestjs/common';
import { EnvelopeCipher } from './envelope-cipher';
import { JwtService } from './jwt.service';
import { PasswordHasher } from './password-hasher';
import { SigningKeysService } from './signing-keys.service';

@Global()
@Module({
  providers: [EnvelopeCipher, PasswordHasher, SigningKeysService, JwtService],
  exports: [EnvelopeCipher, PasswordHasher, SigningKeysService, JwtService],
})
export class CryptoModule {}
