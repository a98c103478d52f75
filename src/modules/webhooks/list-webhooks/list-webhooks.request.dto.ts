import { CursorQuery } from '../../../shared/db/pagination';

/** `?cursor&limit` (default 20, max 100). */
export class ListWebhooksQueryDto extends CursorQuery {}
