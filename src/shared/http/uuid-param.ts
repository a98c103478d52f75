import { ArgumentMetadata, Injectable, Param, ParseUUIDPipe } from '@nestjs/common';
import { ApiParam } from '@nestjs/swagger';
import { AppError } from '../errors/app-error';
import { ErrorCode } from '../errors/error-codes';

/** A UUID path id in its canonical lower-case spelling, so an answer echoes the id as stored. */
@Injectable()
class CanonicalUuidPipe extends ParseUUIDPipe {
  override async transform(value: string, metadata: ArgumentMetadata): Promise<string> {
    return (await super.transform(value, metadata)).toLowerCase();
  }
}

/**
 * A path id that must be a UUID. A malformed id answers the same 404 (with the resource's code)
 * as an unknown id or another tenant's: one body for all three, nothing to tell them apart.
 */
export const UuidParam =
  (name: string, notFound: ErrorCode = 'request/not_found'): ParameterDecorator =>
  (target, key, index) => {
    Param(name, new CanonicalUuidPipe({ exceptionFactory: () => new AppError(notFound) }))(target, key, index);
    // documented as a UUID in the OpenAPI document (the route's own parameter, not a plain string)
    if (key !== undefined) ApiParam({ name, type: String, format: 'uuid' })(target, key, Object.getOwnPropertyDescriptor(target, key)!);
  };
