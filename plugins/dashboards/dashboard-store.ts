import type { Kysely } from 'kysely';
import { problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';

export interface CardLayout {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface DashboardFilter {
  column: string;
  label: string | null;
}

export interface Card {
  id: number;
  type: string;
  title: string | null;
  layout: CardLayout;
  config: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

export interface Dashboard {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  description: string | null;
  filters: DashboardFilter[];
  cards: Card[];
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

export interface NewCard {
  type: string;
  title: string | null;
  layout: CardLayout;
  config: Record<string, unknown>;
}

export interface NewDashboard {
  project_id: number;
  name: string;
  description: string | null;
  filters: DashboardFilter[];
  cards: NewCard[];
}

type DashboardRow = Omit<Dashboard, 'cards' | 'filters'> & { filters: unknown };
type CardRow = Omit<Card, 'layout' | 'config'> & { layout: unknown; config: unknown; dashboard_id: number; org_id: number };

/** Dashboards and their cards, one organization at a time: every read and write is filtered by `orgId`. */
export class DashboardStore {
  constructor(private readonly storage: Storage) {}

  async create(orgId: number, input: NewDashboard, userId: number | null): Promise<Dashboard> {
    const now = this.storage.now();
    const id = await this.storage.transaction(async (trx) => {
      const row = await trx
        .insertInto('dashboards')
        .values({ org_id: orgId, project_id: input.project_id, name: input.name, description: input.description, filters: this.storage.encodeJson(input.filters), created_by: userId, created_at: now, updated_at: now })
        .returning('id')
        .executeTakeFirstOrThrow();
      for (const card of input.cards) await this.insertCard(trx, orgId, row.id, card, now);
      return row.id as number;
    });
    return this.get(orgId, id);
  }

  async list(orgId: number, projectId?: number): Promise<Dashboard[]> {
    let query = this.storage.db.selectFrom('dashboards').selectAll().where('org_id', '=', orgId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    const rows = (await query.orderBy('id').execute()) as DashboardRow[];
    if (!rows.length) return [];
    const cards = (await this.storage.db
      .selectFrom('dashboards_cards')
      .selectAll()
      .where('org_id', '=', orgId)
      .where(
        'dashboard_id',
        'in',
        rows.map((r) => r.id),
      )
      .orderBy('id')
      .execute()) as CardRow[];
    return rows.map((row) => this.dashboardOf(row, cards.filter((c) => c.dashboard_id === row.id)));
  }

  /** The dashboard, if it belongs to the organization; another organization's is "not found". */
  async get(orgId: number, id: number): Promise<Dashboard> {
    const row = (await this.storage.db.selectFrom('dashboards').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()) as DashboardRow | undefined;
    if (!row) throw problems.notFound(`no dashboard ${id} in this organization`);
    const cards = (await this.storage.db.selectFrom('dashboards_cards').selectAll().where('org_id', '=', orgId).where('dashboard_id', '=', id).orderBy('id').execute()) as CardRow[];
    return this.dashboardOf(row, cards);
  }

  async update(orgId: number, id: number, changes: { name?: string; description?: string | null; filters?: DashboardFilter[] }): Promise<Dashboard> {
    const set: Record<string, unknown> = { updated_at: this.storage.now() };
    if (changes.name !== undefined) set.name = changes.name;
    if (changes.description !== undefined) set.description = changes.description;
    if (changes.filters !== undefined) set.filters = this.storage.encodeJson(changes.filters);
    const updated = await this.storage.db.updateTable('dashboards').set(set).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) throw problems.notFound(`no dashboard ${id} in this organization`);
    return this.get(orgId, id);
  }

  /** Deletes the dashboard with its cards and share links (their pages are gone with it). */
  async remove(orgId: number, id: number): Promise<void> {
    await this.storage.transaction(async (trx) => {
      await trx.deleteFrom('dashboards_cards').where('org_id', '=', orgId).where('dashboard_id', '=', id).execute();
      await trx.deleteFrom('dashboards_links').where('org_id', '=', orgId).where('dashboard_id', '=', id).execute();
      const deleted = await trx.deleteFrom('dashboards').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
      if (Number(deleted.numDeletedRows) === 0) throw problems.notFound(`no dashboard ${id} in this organization`);
    });
  }

  async addCard(orgId: number, dashboardId: number, card: NewCard): Promise<Card> {
    const now = this.storage.now();
    const id = await this.storage.transaction(async (trx) => {
      await this.touch(trx, orgId, dashboardId, now);
      return this.insertCard(trx, orgId, dashboardId, card, now);
    });
    return this.card(orgId, dashboardId, id);
  }

  async updateCard(orgId: number, dashboardId: number, cardId: number, card: NewCard): Promise<Card> {
    const now = this.storage.now();
    await this.storage.transaction(async (trx) => {
      await this.touch(trx, orgId, dashboardId, now);
      const updated = await trx
        .updateTable('dashboards_cards')
        .set({ type: card.type, title: card.title, layout: this.storage.encodeJson(card.layout), config: this.storage.encodeJson(card.config), updated_at: now })
        .where('org_id', '=', orgId)
        .where('dashboard_id', '=', dashboardId)
        .where('id', '=', cardId)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) throw problems.notFound(`no card ${cardId} on dashboard ${dashboardId}`);
    });
    return this.card(orgId, dashboardId, cardId);
  }

  async removeCard(orgId: number, dashboardId: number, cardId: number): Promise<void> {
    await this.storage.transaction(async (trx) => {
      await this.touch(trx, orgId, dashboardId, this.storage.now());
      const deleted = await trx.deleteFrom('dashboards_cards').where('org_id', '=', orgId).where('dashboard_id', '=', dashboardId).where('id', '=', cardId).executeTakeFirst();
      if (Number(deleted.numDeletedRows) === 0) throw problems.notFound(`no card ${cardId} on dashboard ${dashboardId}`);
    });
  }

  /** The card of the organization's dashboard, or a 404 problem. */
  async card(orgId: number, dashboardId: number, cardId: number): Promise<Card> {
    const row = (await this.storage.db
      .selectFrom('dashboards_cards')
      .selectAll()
      .where('org_id', '=', orgId)
      .where('dashboard_id', '=', dashboardId)
      .where('id', '=', cardId)
      .executeTakeFirst()) as CardRow | undefined;
    if (!row) throw problems.notFound(`no card ${cardId} on dashboard ${dashboardId} in this organization`);
    return this.cardOf(row);
  }

  /** How many dashboards the project holds (a project holding any is not deleted). */
  async countInProject(orgId: number, projectId: number): Promise<number> {
    const { n } = await this.storage.db.selectFrom('dashboards').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(n);
  }

  /** Marks the dashboard changed (its cards are part of it); a 404 problem when it is not the organization's. */
  private async touch(trx: Kysely<any>, orgId: number, id: number, now: string): Promise<void> {
    const updated = await trx.updateTable('dashboards').set({ updated_at: now }).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) throw problems.notFound(`no dashboard ${id} in this organization`);
  }

  private async insertCard(trx: Kysely<any>, orgId: number, dashboardId: number, card: NewCard, now: string): Promise<number> {
    const row = await trx
      .insertInto('dashboards_cards')
      .values({ org_id: orgId, dashboard_id: dashboardId, type: card.type, title: card.title, layout: this.storage.encodeJson(card.layout), config: this.storage.encodeJson(card.config), created_at: now, updated_at: now })
      .returning('id')
      .executeTakeFirstOrThrow();
    return row.id as number;
  }

  private dashboardOf(row: DashboardRow, cards: CardRow[]): Dashboard {
    return { ...row, filters: this.storage.decodeJson<DashboardFilter[]>(row.filters), cards: cards.map((c) => this.cardOf(c)) };
  }

  private cardOf({ dashboard_id: _dashboard, org_id: _org, ...row }: CardRow): Card {
    return { ...row, layout: this.storage.decodeJson<CardLayout>(row.layout), config: this.storage.decodeJson<Record<string, unknown>>(row.config) };
  }
}
