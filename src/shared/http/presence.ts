import { ValidateIf } from 'class-validator';

/**
 * Optional body fields: absent is fine; `null` is validated like any other value, so it is 400
 * for a field that cannot be null (class-validator's IsOptional would let null through as absent).
 */
export const Present = (): PropertyDecorator => ValidateIf((_o, v) => v !== undefined);

/** Optional and nullable: absent or null skip validation (null clears the field). */
export const Nullable = (): PropertyDecorator => ValidateIf((_o, v) => v !== undefined && v !== null);
