/**
 * The dashboards plugin's public contract: the extension point card types are contributed to, and
 * what a card type is given to compute its data.
 */
import { defineExtensionPoint, z, type Principal } from '../../kernel/plugin-api.ts';
import type { DatasetInfo } from '../datasets/public.ts';
import type { GovernedResult } from '../sql/public.ts';

export type JsonSchema = Record<string, unknown>;

/**
 * Text of a governed SELECT being written by a card type. Identifiers and values never go into the
 * text as the caller wrote them: `id` quotes a name, `value` binds a value as `$n`.
 */
export interface CardSql {
  /**
   * The dataset as a relation to read `from` (aliased `src`): the dataset as the viewer may see
   * it (row policies, PII masked) and narrowed by the dashboard's filters on the columns it has.
   */
  from(dataset: DatasetInfo): string;
  /** A quoted identifier (a column name). */
  id(name: string): string;
  /** A bound parameter (`$n`) holding `value`. */
  value(value: string | number | boolean | null): string;
  /** The seconds from `earlier` to `later` (expressions of date or timestamp columns), in the database's dialect. */
  secondsBetween(earlier: string, later: string): string;
}

/** What a card type is given to compute a card's data: the viewer, the card's config, and governed SQL. */
export interface CardDataContext<C> {
  config: C;
  orgId: number;
  /** Who the data is computed for: the viewer, or the publisher of a published page. */
  principal: Principal;
  /**
   * The organization's dataset `id`, or a 400 problem naming `location` (e.g. `config.dataset_id`)
   * when it has none of that id.
   */
  dataset(id: number, location: string): Promise<DatasetInfo>;
  /** Runs one governed SELECT written with `build` (as POST /api/sql runs one, audited), at most `limit` rows. */
  query(build: (sql: CardSql) => string, options?: { limit?: number }): Promise<GovernedResult>;
  /** Runs a governed query written by the dashboard's author (SQL and `$n` params), as POST /api/sql would. */
  governed(query: { sql: string; params?: unknown[] }, options?: { limit?: number }): Promise<GovernedResult>;
}

/** A card's data as computed: the JSON a client draws, and the same data as a table for CSV export (null: none). */
export interface CardData {
  data: Record<string, unknown>;
  table: { columns: string[]; rows: unknown[][] } | null;
}

/** What a card type checks when a card is saved, beyond its config's JSON Schema (a column that exists). */
export interface CardCheckContext<C> {
  config: C;
  orgId: number;
  /** Where the config is in the request (`body.cards.0.config`): a problem names its field under it. */
  at: string;
  dataset(id: number, location: string): Promise<DatasetInfo>;
}

/** A kind of dashboard card, contributed to `dashboards.card-types` from code. */
export interface CardTypeContribution<C = any> {
  /** Unique across plugins: a second plugin contributing the same type fails to load. */
  type: string;
  description?: string;
  /** JSON Schema (2020-12) of the card's `config`, checked when the card is saved (400 naming `…config.<field>`). */
  config: JsonSchema;
  /** Checks the config against the organization's data when a card is saved and before its data is computed; throws a 400 problem naming `config.<field>`. */
  check?(context: CardCheckContext<C>): Promise<void>;
  /** Computes the card's data. */
  data(context: CardDataContext<C>): Promise<CardData>;
}

/** A card type contributed from code, its functions typed by its config. */
export function cardType<C>(type: CardTypeContribution<C>): CardTypeContribution<C> {
  return type;
}

/** Checked by the kernel: a lower-case type, a config schema, a `data` function. */
export const cardTypes = defineExtensionPoint<CardTypeContribution>({
  id: 'dashboards.card-types',
  key: (type) => type.type,
  schema: z
    .object({
      type: z.string().regex(/^[a-z][a-z0-9_]{0,62}$/, 'must be a lower-case identifier such as process_map'),
      description: z.string().optional(),
      config: z.record(z.string(), z.unknown()).describe('JSON Schema of the card config'),
      check: z.custom<CardTypeContribution['check']>((value) => typeof value === 'function', 'must be a function').optional(),
      data: z.custom<CardTypeContribution['data']>((value) => typeof value === 'function', 'must be a function'),
    })
    .strict(),
});

/**
 * The durable event published with a dashboard's new share link (POST /api/dashboards/{id}/publish),
 * in the transaction that creates it.
 */
export const DASHBOARD_PUBLISHED = 'dashboard.published';
export interface DashboardPublishedEvent {
  dashboard_id: number;
  link_id: number;
  name: string;
  project_id: number;
  published_by: number;
  /** Who created the dashboard. */
  created_by: number | null;
  expires_at: string;
}
