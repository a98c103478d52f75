import { Param, ParseUUIDPipe } from '@nestjs/common';
import { AppError } from '../errors/app-error';
import { ErrorCode } from '../errors/error-codes';

/**
 * A path id that must be a UUID. A malformed id answers the same 404 (with the resource's code)
 * as an unknown id or another tenant's: one body for all three, nothing to tell them apart.
 */
export const UuidParam = (name: string, notFound: ErrorCode = 'request/not_found') =>
  Param(name, new ParseUUIDPipe({ exceptionFactory: () => new AppError(notFound) }));
