import { ArgumentMetadata, Type, ValidationPipe } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage } from 'class-validator';
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

/** Most errors[] entries one answer lists (a body has at most MAX_BODY_PROPERTIES names: the answer stays small). */
export const MAX_FIELD_ERRORS = 50;

const invalid = (errors: FieldError[]) =>
  new AppError('request/invalid', errors.length > MAX_FIELD_ERRORS ? `${errors.length} fields are invalid; the first ${MAX_FIELD_ERRORS} are listed` : 'One or more fields are invalid', {
    errors: errors.slice(0, MAX_FIELD_ERRORS),
  });

/** The property names a DTO class validates (any other is unknown: whitelist), cached per class. */
const knownNames = new WeakMap<object, Set<string>>();
function namesOf(metatype: Type<unknown>): Set<string> {
  let names = knownNames.get(metatype);
  if (!names) {
    names = new Set(getMetadataStorage().getTargetValidationMetadatas(metatype, '', true, false).map((m) => m.propertyName));
    knownNames.set(metatype, names);
  }
  return names;
}

/** Global DTO validation: unknown properties are rejected; failures are 400 request/invalid. */
class BodyValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    // many unknown names: answered from the names alone, before the DTO transform, whose cost grows
    // with every name (a body of hundreds of them would cost many times a real request)
    if (value && typeof value === 'object' && !Array.isArray(value) && metadata.metatype && this.toValidate(metadata)) {
      const known = namesOf(metadata.metatype);
      const unknown = Object.keys(value).filter((k) => !known.has(k));
      if (unknown.length > MAX_FIELD_ERRORS) throw invalid(unknown.map((field) => ({ field, message: `property ${field} is not allowed` })));
    }
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
