import { HttpProblem, problems, type FieldError, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { DatasetCatalog, DatasetInfo } from '../datasets/public.ts';
import type { GovernedSql } from '../sql/public.ts';
import { CardStatement, type ActiveFilters, type FilterValue } from './card-sql.ts';
import type { CardTypes } from './card-types.ts';
import type { Card, Dashboard, NewCard } from './dashboard-store.ts';
import type { CardData } from './public.ts';

/** The most values one filter may take in one request, and the longest value. */
export const FILTER_MAX_VALUES = 100;
export const FILTER_MAX_TEXT = 1000;

/** The most rows a card's statement may answer. */
const CARD_MAX_ROWS = 10_000;

/** The grid a dashboard's cards are laid out on: this many columns wide. */
export const GRID_COLUMNS = 24;

export interface CardDataDeps {
  storage: Storage;
  catalog: DatasetCatalog;
  governed: GovernedSql;
  types: CardTypes;
}

/** Checks cards when they are saved, and computes a card's data for a viewer. */
export class CardService {
  constructor(private readonly deps: CardDataDeps) {}

  /**
   * A card as it may be saved in the organization: its type offered there, its layout inside the
   * grid, its config valid for the type's schema and for the organization's data; else a 400
   * naming every field under `at` (e.g. `body.cards.2`).
   */
  async check(orgId: number, card: NewCard, at: string): Promise<void> {
    const type = await this.deps.types.get(orgId, card.type);
    if (!type) {
      const offered = (await this.deps.types.described(orgId)).map((t) => t.type);
      throw problems.badRequest(`unknown card type "${card.type}" (offered here: ${offered.join(', ')})`, [{ path: `${at}.type`, message: `unknown card type ${card.type}` }]);
    }
    const errors: FieldError[] = [];
    if (card.layout.x + card.layout.w > GRID_COLUMNS) errors.push({ path: `${at}.layout.w`, message: `x + w must be at most ${GRID_COLUMNS} (the grid's width)` });
    errors.push(...type.checkConfig(card.config, `${at}.config`));
    if (errors.length) throw problems.badRequest(`the card is invalid: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);
    await type.contribution.check?.({ config: card.config, orgId, at: `${at}.config`, dataset: (id, location) => this.dataset(orgId, id, location, 'save') });
  }

  /**
   * The card's data computed for `principal` (the viewer, or a published page's publisher) through
   * governed SQL, narrowed by the dashboard's filters set in `filterValues` (column → texts).
   * `maskPii`: every PII column reads masked, whatever `principal` holds (a published page).
   */
  async data(dashboard: Dashboard, card: Card, filterValues: Record<string, string | string[]>, principal: Principal, audit: RequestAudit, options: { maskPii?: boolean } = {}): Promise<CardData> {
    const orgId = dashboard.org_id;
    const type = await this.deps.types.get(orgId, card.type);
    if (!type) throw problems.unprocessable(`the card's type "${card.type}" is not offered in this organization (its plugin is off or gone)`);
    const filters = this.filters(dashboard, filterValues);
    const dataset = (id: number, location: string) => this.dataset(orgId, id, location, 'data');
    await type.contribution.check?.({ config: card.config, orgId, at: 'config', dataset });
    const { governed, storage } = this.deps;
    const run = (sql: string, params: unknown[], bounds?: { limit?: number }) =>
      governed.run({ sql, params, limit: Math.min(bounds?.limit ?? 1000, CARD_MAX_ROWS), unmasked: options.maskPii ? [] : undefined }, orgId, principal, audit);
    return type.contribution.data({
      config: card.config,
      orgId,
      principal,
      dataset,
      query: (build, bounds) => {
        const statement = new CardStatement(filters, storage.secondsBetweenSql);
        return run(build(statement), statement.params, bounds);
      },
      governed: (query, bounds) => run(query.sql, query.params ?? [], bounds),
    });
  }

  /**
   * The dashboard's filters as the viewer set them in the query string: a name that is no filter of
   * the dashboard, too many values or too long a value is a 400 naming `query.<name>`; each value
   * is typed per dataset when a card reads one with that column (a value that does not fit: 400).
   */
  private filters(dashboard: Dashboard, values: Record<string, string | string[]>): ActiveFilters {
    const declared = new Set(dashboard.filters.map((f) => f.column));
    const active = new Map<string, { parse(dataset: DatasetInfo): FilterValue[] }>();
    for (const [name, given] of Object.entries(values)) {
      const path = `query.${name}`;
      const refuse = (message: string) => problems.badRequest(`${path}: ${message}`, [{ path, message }]);
      if (!declared.has(name)) throw refuse(`not a filter of this dashboard (its filters: ${[...declared].join(', ') || 'none'})`);
      const texts = Array.isArray(given) ? given : [given];
      if (texts.length > FILTER_MAX_VALUES) throw refuse(`at most ${FILTER_MAX_VALUES} values`);
      for (const text of texts) {
        if (text.length > FILTER_MAX_TEXT) throw refuse(`a value must be at most ${FILTER_MAX_TEXT} characters`);
        if (text.includes('\0')) throw refuse('must not contain a NUL character');
      }
      active.set(name, {
        parse: (dataset) => {
          const column = dataset.columns.find((c) => c.name === name)!;
          try {
            return texts.map((text) => this.deps.catalog.parseText(column.type, text) as FilterValue);
          } catch (err) {
            throw refuse(`${(err as Error).message} (column "${name}" of dataset "${dataset.name}" is ${column.type})`);
          }
        },
      });
    }
    return active;
  }

  /**
   * The organization's dataset: when a card is saved, one it does not have is a 400 naming the
   * field; when data is computed, a 409 (the card names a dataset deleted since).
   */
  private async dataset(orgId: number, id: number, location: string, when: 'save' | 'data'): Promise<DatasetInfo> {
    try {
      return await this.deps.catalog.get(orgId, id);
    } catch (err) {
      if (!(err instanceof HttpProblem) || err.status !== 404) throw err;
      if (when === 'save') throw problems.badRequest(`${location}: no dataset ${id} in this organization`, [{ path: location, message: `no dataset ${id} in this organization` }]);
      throw problems.conflict(`the card reads dataset ${id}, which is no longer in this organization: change the card`);
    }
  }
}
