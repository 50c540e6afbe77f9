import { csvLines, defineRoute, identitySchemas as s, problems, reply, z, type Principal } from '../../kernel/plugin-api.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import type { CardService } from './card-data.ts';
import type { CardTypes } from './card-types.ts';
import type { CardLayout, DashboardStore, NewCard } from './dashboard-store.ts';
import { cardChanges, cardDataSchema, cardInput, cardSchema, cardTypeSchema, dashboardChanges, dashboardInput, dashboardSchema, filterQuery } from './schemas.ts';

export interface DashboardRouteDeps {
  store: DashboardStore;
  cards: CardService;
  types: CardTypes;
  projects: ProjectCatalog;
}

const base = { security: 'bearer', orgScoped: true } as const;
const idParams = s.idParam('id');
const cardParams = idParams.extend(s.idParam('card_id').shape);

type CardInput = z.infer<typeof cardInput>;

/** Where a card without a layout goes: half the grid's width, below every card placed so far. */
function placed(card: CardInput, above: { layout: CardLayout }[]): NewCard {
  const bottom = above.reduce((y, c) => Math.max(y, c.layout.y + c.layout.h), 0);
  return { type: card.type, title: card.title ?? null, layout: card.layout ?? { x: 0, y: bottom, w: 12, h: 6 }, config: card.config };
}

/** Computing a card's data reads datasets: the viewer needs `datasets.read` as well as `dashboards.read`. */
function assertReadsData(principal: Principal) {
  if (!principal.capabilities.has('datasets.read')) throw problems.forbidden('a card\u2019s data is read from datasets: this needs the capability "datasets.read"');
}

export function dashboardRoutes({ store, cards, types, projects }: DashboardRouteDeps) {
  async function checkedCards(orgId: number, input: CardInput[], above: { layout: CardLayout }[], at: (i: number) => string): Promise<NewCard[]> {
    const result: NewCard[] = [];
    for (const [i, card] of input.entries()) {
      const next = placed(card, [...above, ...result]);
      await cards.check(orgId, next, at(i));
      result.push(next);
    }
    return result;
  }

  async function cardData(orgId: number, id: number, cardId: number, query: Record<string, string | string[]>, principal: Principal, audit: Parameters<CardService['data']>[4]) {
    assertReadsData(principal);
    const dashboard = await store.get(orgId, id);
    const card = dashboard.cards.find((c) => c.id === cardId);
    if (!card) throw problems.notFound(`no card ${cardId} on dashboard ${id}`);
    return { card, result: await cards.data(dashboard, card, query, principal, audit) };
  }

  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/card-types',
      summary: 'Card types offered in the organization',
      description: 'Each with the JSON Schema its cards\u2019 `config` is checked against. Plugins add types through the extension point `dashboards.card-types`.',
      capability: 'dashboards.read',
      responses: { 200: { description: 'The card types, by type', schema: z.object({ items: z.array(cardTypeSchema) }) } },
      handler: async ({ orgId }) => ({ items: await types.described(orgId) }),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '',
      summary: 'Create a dashboard',
      description: 'With its cards (each checked: an offered type, a config its schema and the organization\u2019s data accept, a layout inside the 24-column grid) and its filters. Answered with the cards\u2019 ids.',
      capability: 'dashboards.write',
      request: { body: dashboardInput },
      responses: { 201: { description: 'Created', schema: dashboardSchema }, 422: { description: 'No such project in this organization' } },
      handler: async ({ body, orgId, principal, audit }) => {
        if (!(await projects.exists(orgId, body.project_id))) throw problems.unprocessable(`no project ${body.project_id} in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
        const newCards = await checkedCards(orgId, body.cards, [], (i) => `body.cards.${i}`);
        const dashboard = await store.create(orgId, { project_id: body.project_id, name: body.name, description: body.description ?? null, filters: body.filters.map((f) => ({ column: f.column, label: f.label ?? null })), cards: newCards }, principal.userId);
        await audit.record({ action: 'dashboards.create', targetType: 'dashboard', targetId: dashboard.id, details: { project_id: dashboard.project_id, cards: dashboard.cards.length } });
        return reply(201, dashboard);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '',
      summary: 'List dashboards',
      description: 'The organization\u2019s dashboards with their cards, of one project with `project_id`.',
      capability: 'dashboards.read',
      request: { query: z.object({ project_id: s.pathId.optional() }) },
      responses: { 200: { description: 'The dashboards, by id', schema: z.object({ items: z.array(dashboardSchema) }) } },
      handler: async ({ query, orgId }) => ({ items: await store.list(orgId, query.project_id) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}',
      summary: 'Get a dashboard',
      description: 'The dashboard with its cards and filters.',
      capability: 'dashboards.read',
      request: { params: idParams },
      responses: { 200: { description: 'The dashboard', schema: dashboardSchema } },
      handler: ({ params, orgId }) => store.get(orgId, params.id),
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/{id}',
      summary: 'Change a dashboard',
      description: 'Its name, description or filters; cards are changed one by one under /cards.',
      capability: 'dashboards.write',
      request: { params: idParams, body: dashboardChanges },
      responses: { 200: { description: 'The dashboard', schema: dashboardSchema } },
      handler: async ({ params, body, orgId, audit }) => {
        const filters = body.filters?.map((f) => ({ column: f.column, label: f.label ?? null }));
        const dashboard = await store.update(orgId, params.id, { name: body.name, description: body.description, filters });
        await audit.record({ action: 'dashboards.update', targetType: 'dashboard', targetId: params.id, details: { changed: Object.keys(body) } });
        return dashboard;
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/{id}',
      summary: 'Delete a dashboard',
      description: 'With its cards.',
      capability: 'dashboards.write',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        await store.remove(orgId, params.id);
        await audit.record({ action: 'dashboards.delete', targetType: 'dashboard', targetId: params.id });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/cards',
      summary: 'Add a card to a dashboard',
      description: 'Checked as at creation; without a layout it goes below the other cards.',
      capability: 'dashboards.write',
      request: { params: idParams, body: cardInput },
      responses: { 201: { description: 'The card', schema: cardSchema } },
      handler: async ({ params, body, orgId, audit }) => {
        const dashboard = await store.get(orgId, params.id);
        const [card] = await checkedCards(orgId, [body], dashboard.cards, () => 'body');
        const added = await store.addCard(orgId, params.id, card);
        await audit.record({ action: 'dashboards.card.add', targetType: 'dashboard', targetId: params.id, details: { card_id: added.id, type: added.type } });
        return reply(201, added);
      },
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/{id}/cards/{card_id}',
      summary: 'Change a card',
      description: 'Any of type, title, layout and config; the card as changed is checked whole (a new type needs a config it accepts).',
      capability: 'dashboards.write',
      request: { params: cardParams, body: cardChanges },
      responses: { 200: { description: 'The card', schema: cardSchema } },
      handler: async ({ params, body, orgId, audit }) => {
        const current = await store.card(orgId, params.id, params.card_id);
        const next: NewCard = { type: body.type ?? current.type, title: body.title === undefined ? current.title : body.title, layout: body.layout ?? current.layout, config: body.config ?? current.config };
        await cards.check(orgId, next, 'body');
        const card = await store.updateCard(orgId, params.id, params.card_id, next);
        await audit.record({ action: 'dashboards.card.update', targetType: 'dashboard', targetId: params.id, details: { card_id: card.id, changed: Object.keys(body) } });
        return card;
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/{id}/cards/{card_id}',
      summary: 'Remove a card',
      description: 'The other cards keep their places.',
      capability: 'dashboards.write',
      request: { params: cardParams },
      responses: { 204: { description: 'Removed' } },
      handler: async ({ params, orgId, audit }) => {
        await store.removeCard(orgId, params.id, params.card_id);
        await audit.record({ action: 'dashboards.card.remove', targetType: 'dashboard', targetId: params.id, details: { card_id: params.card_id } });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/cards/{card_id}/data',
      summary: 'A card\u2019s data',
      description:
        'Computed now through governed SQL as the caller: row policies apply and PII columns read *** without datasets.pii.read (each statement audited as `sql.execute`). Each dashboard filter is a query parameter named by its column (repeat it for several values, any of which a row may hold; an empty value is null); it narrows every card whose dataset has that column. A parameter that is no filter of the dashboard, or a value that does not fit the column\u2019s type, is a 400 naming it. Needs datasets.read as well.',
      capability: 'dashboards.read',
      request: { params: cardParams, query: filterQuery },
      responses: {
        200: { description: 'The data', schema: cardDataSchema },
        409: { description: 'The card reads a dataset deleted since it was saved' },
        422: { description: 'The card\u2019s type is no longer offered here, or the query timed out' },
      },
      handler: async ({ params, query, orgId, principal, audit }) => {
        const { card, result } = await cardData(orgId, params.id, params.card_id, query, principal, audit);
        return { card_id: card.id, type: card.type, data: result.data, computed_at: new Date().toISOString() };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/cards/{card_id}/export',
      summary: 'A card\u2019s data as CSV',
      description:
        'The card\u2019s data as a table (header first), computed and filtered as GET …/data; text cells that begin like a formula get a leading `\'`. A card without tabular data (text) is a 422.',
      capability: 'dashboards.read',
      request: { params: cardParams, query: filterQuery },
      responses: {
        200: { description: 'The CSV', content: { 'text/csv': z.string() } },
        409: { description: 'The card reads a dataset deleted since it was saved' },
        422: { description: 'The card has no tabular data (text), its type is no longer offered, or the query timed out' },
      },
      handler: async ({ params, query, orgId, principal, audit }) => {
        const { card, result } = await cardData(orgId, params.id, params.card_id, query, principal, audit);
        if (!result.table) throw problems.unprocessable(`a ${card.type} card has no tabular data to export`);
        const text = csvLines([result.table.columns, ...result.table.rows]);
        return reply(200, text, { 'Content-Type': 'text/csv; charset=utf-8', 'Content-Disposition': `attachment; filename="dashboard-${params.id}-card-${card.id}.csv"` });
      },
    }),
  ];
}
