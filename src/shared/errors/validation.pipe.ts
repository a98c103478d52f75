import { ArgumentMetadata, ValidationPipe } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { AppError, FieldError } from './app-error';
import { flattenValidationErrors } from './problem';

/**
 * Keys of the body that class-transformer left out of the DTO instance: it skips any key naming a
 * property the target already inherits (`toString`, `constructor`, `valueOf`, ... of every object),
 * so such a key escaped the unknown-property check, and inside a free-form object it was lost.
 * Answered as unknown properties, at any depth.
 */
export function droppedFields(plain: unknown, built: unknown, parent = ''): FieldError[] {
  if (!plain || typeof plain !== 'object' || !built || typeof built !== 'object' || plain === built) return [];
  const out: FieldError[] = [];
  for (const key of Object.keys(plain)) {
    const field = parent ? `${parent}.${key}` : key;
    if (Object.prototype.hasOwnProperty.call(built, key)) out.push(...droppedFields((plain as Record<string, unknown>)[key], (built as Record<string, unknown>)[key], field));
    else if (key in built) out.push({ field, message: `property ${field} is not allowed` });
  }
  return out;
}

const invalid = (errors: FieldError[]) => new AppError('request/invalid', 'One or more fields are invalid', { errors });

/** Global DTO validation: unknown properties are rejected; failures are 400 request/invalid. */
class BodyValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    let built: unknown;
    try {
      built = await super.transform(value, metadata);
    } catch (e) {
      // the same keys reported beside the other faults (one errors[] entry per offending field)
      if (e instanceof AppError && e.options.errors && metadata.metatype && this.toValidate(metadata)) {
        const seen = new Set(e.options.errors.map((f) => f.field));
        e.options.errors.push(...droppedFields(value, plainToInstance(metadata.metatype, value)).filter((f) => !seen.has(f.field)));
      }
      throw e;
    }
    const dropped = droppedFields(value, built);
    if (dropped.length) throw invalid(dropped);
    return built;
  }
}

export function createValidationPipe(): ValidationPipe {
  return new BodyValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    // the value tells a missing field from a bad one; it never leaves flattenValidationErrors
    validationError: { target: false, value: true },
    exceptionFactory: (errors) => invalid(flattenValidationErrors(errors)),
  });
}
