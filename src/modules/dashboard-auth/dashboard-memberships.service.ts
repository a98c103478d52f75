import { Injectable } from '@nestjs/common';
import { Queryable } from '../../shared/db/db.service';

/** A dashboard user's memberships, as every dashboard session answer lists them. */
@Injectable()
export class DashboardMembershipsService {
  async of(q: Queryable, userId: string): Promise<{ tenant_id: string; tenant_slug: string; role: 'owner' | 'member' }[]> {
    return q.query<{ tenant_id: string; tenant_slug: string; role: 'owner' | 'member' }>(
      `SELECT t.id AS tenant_id, t.slug AS tenant_slug, m.role FROM tenant_members m JOIN tenants t ON t.id = m.tenant_id WHERE m.user_id = $1 ORDER BY t.slug`,
      [userId],
    );
  }
}
