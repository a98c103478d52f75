import { InitialSchema1763700000000 } from './1763700000000-initial-schema';

/** Every migration, in order. A new migration is added here (explicit: no globbing at runtime). */
export const ALL_MIGRATIONS = [InitialSchema1763700000000];
