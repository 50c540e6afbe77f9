import crypto from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Storage } from '../../storage/index.ts';

/** A share link of a published dashboard as answered (never its token, shown once at publishing). */
export interface DashboardLink {
  id: number;
  dashboard_id: number;
  published_by: number;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  state: 'active' | 'expired' | 'revoked';
}

/** A live link found by its token: what a page is rendered for. */
export interface LiveLink {
  id: number;
  org_id: number;
  dashboard_id: number;
  published_by: number;
  expires_at: string;
}

type LinkRow = Omit<DashboardLink, 'state'> & { org_id: number; nonce: string; revoked_by: number | null };

/** Tokens look like `<link id>.<nonce>.<signature>`: a token of another shape is no link at all. */
const TOKEN = /^([1-9][0-9]{0,15})\.([A-Za-z0-9_-]{22})\.([0-9a-f]{64})$/;

/**
 * Share links of published dashboards. A token is signed with the platform's keyed HMAC (the key
 * of personal access tokens, which no plugin holds), so it cannot be forged or altered; the link
 * row makes it revocable and bounded in time.
 */
export class LinkStore {
  constructor(
    private readonly storage: Storage,
    private readonly hmac: (text: string) => string,
  ) {}

  private signature(id: number, nonce: string): string {
    return this.hmac(`dashboards.link:${id}.${nonce}`);
  }

  /** A new link of the dashboard, in `trx`: answered with its token (the only time it is). */
  async create(trx: Kysely<any>, orgId: number, dashboardId: number, publishedBy: number, expiresAt: string): Promise<{ link: DashboardLink; token: string }> {
    const nonce = crypto.randomBytes(16).toString('base64url');
    const row = (await trx
      .insertInto('dashboards_links')
      .values({ org_id: orgId, dashboard_id: dashboardId, nonce, published_by: publishedBy, created_at: this.storage.now(), expires_at: expiresAt })
      .returningAll()
      .executeTakeFirstOrThrow()) as LinkRow;
    return { link: this.answer(row), token: `${row.id}.${nonce}.${this.signature(row.id, nonce)}` };
  }

  async list(orgId: number, dashboardId: number): Promise<DashboardLink[]> {
    const rows = (await this.storage.db.selectFrom('dashboards_links').selectAll().where('org_id', '=', orgId).where('dashboard_id', '=', dashboardId).orderBy('id').execute()) as LinkRow[];
    return rows.map((row) => this.answer(row));
  }

  /** Revokes the dashboard's live links (one, or all); answers how many were live. */
  async revoke(orgId: number, dashboardId: number, userId: number, linkId?: number): Promise<number> {
    const now = this.storage.now();
    let query = this.storage.db.updateTable('dashboards_links').set({ revoked_at: now, revoked_by: userId }).where('org_id', '=', orgId).where('dashboard_id', '=', dashboardId).where('revoked_at', 'is', null).where('expires_at', '>', now);
    if (linkId !== undefined) query = query.where('id', '=', linkId);
    return Number((await query.executeTakeFirst()).numUpdatedRows);
  }

  /** The link a token names when its signature holds and it is neither revoked nor expired; else null. */
  async live(token: string): Promise<LiveLink | null> {
    const match = TOKEN.exec(token);
    if (!match) return null;
    const id = Number(match[1]);
    const expected = Buffer.from(this.signature(id, match[2]));
    if (!crypto.timingSafeEqual(expected, Buffer.from(match[3]))) return null;
    const row = (await this.storage.db
      .selectFrom('dashboards_links')
      .select(['id', 'org_id', 'dashboard_id', 'published_by', 'expires_at', 'nonce'])
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', this.storage.now())
      .executeTakeFirst()) as (LiveLink & { nonce: string }) | undefined;
    if (!row || row.nonce !== match[2]) return null;
    const { nonce: _, ...link } = row;
    return link;
  }

  /** The dashboards of the organization with a live link: when each was first published, by whom. */
  async published(orgId: number): Promise<{ dashboard_id: number; published_by: number; published_at: string }[]> {
    const now = this.storage.now();
    const rows = await this.storage.db
      .selectFrom('dashboards_links')
      .select(['dashboard_id', 'published_by', 'created_at'])
      .where('org_id', '=', orgId)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', now)
      .orderBy('id')
      .execute();
    const first = new Map<number, { dashboard_id: number; published_by: number; published_at: string }>();
    for (const row of rows) if (!first.has(row.dashboard_id)) first.set(row.dashboard_id, { dashboard_id: row.dashboard_id, published_by: row.published_by, published_at: row.created_at });
    return [...first.values()];
  }

  private answer({ org_id: _org, nonce: _nonce, revoked_by: _by, ...row }: LinkRow): DashboardLink {
    const state = row.revoked_at ? 'revoked' : row.expires_at <= this.storage.now() ? 'expired' : 'active';
    return { ...row, state };
  }
}
