import { ValidationPipe } from '@nestjs/common';
import { AppError } from './app-error';
import { flattenValidationErrors } from './problem';

/** Global DTO validation: unknown properties are rejected; failures are 400 request/invalid. */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    // the value tells a missing field from a bad one; it never leaves flattenValidationErrors
    validationError: { target: false, value: true },
    exceptionFactory: (errors) =>
      new AppError('request/invalid', 'One or more fields are invalid', { errors: flattenValidationErrors(errors) }),
  });
}
