import { sql, type RawBuilder } from 'kysely';
import { pageCursor, problems, type Principal } from '../../kernel/plugin-api.ts';
import { ROW_ID, type Storage } from '../../storage/index.ts';
import { columnLookup, compileFilter, compileOneOf } from './filters.ts';
import { PII_MASK, ROWS_PAGE_MAX, ROWS_STREAM_PAGE_MAX, type DatasetCatalog, type RowsBlock, type RowsPage, type RowsQuery } from './public.ts';
import type { Dataset, DatasetColumn, DatasetStore } from './dataset-store.ts';
import type { RowPolicies } from './row-policies.ts';

/**
 * What the caller may see: PII columns are masked for callers without `datasets.pii.read`, and
 * only rows within the caller's row-policy scope come back (null: every row).
 */
export interface Visibility {
  seePii: boolean;
  scope: RawBuilder<boolean> | null;
}

/** PII columns are shown only to callers holding `datasets.pii.read`. */
export const seesPii = (principal: Principal) => principal.capabilities.has('datasets.pii.read');

/** What `principal` may see of `dataset`, for `queryRows` and exports. */
export async function visibilityOf(policies: RowPolicies, principal: Principal, dataset: Dataset): Promise<Visibility> {
  return { seePii: seesPii(principal), scope: (await policies.scope(principal, dataset)).condition };
}

/** The route's query schema bounds these already; a service caller is held to the same bounds. */
function checkPaging({ limit, offset }: RowsQuery): void {
  if (!Number.isInteger(limit) || limit < 1 || limit > ROWS_PAGE_MAX) {
    throw problems.badRequest(`limit must be an integer from 1 to ${ROWS_PAGE_MAX}`, [{ path: 'query.limit', message: 'out of range' }]);
  }
  if (offset !== undefined && (!Number.isInteger(offset) || offset < 0)) {
    throw problems.badRequest('offset must be a non-negative integer', [{ path: 'query.offset', message: 'out of range' }]);
  }
}

/**
 * Reads a page of an organization's dataset as the caller may see it: the one path behind both
 * `GET /api/datasets/{id}/rows` and the catalog's `rows` (API Service lookups, spec §2.5).
 */
export function rowsReader(storage: Storage, store: DatasetStore, policies: RowPolicies, maxPageBytes: number): DatasetCatalog['rows'] {
  return async (principal, orgId, datasetId, query) => {
    checkPaging(query);
    const dataset = await store.get(orgId, datasetId);
    return queryRows(storage, dataset, query, await visibilityOf(policies, principal, dataset), maxPageBytes);
  };
}

/**
 * Streams a dataset's rows as the caller may see them: the catalog's `stream` (a plugin recipe
 * handler's inputs). Row policies and PII as for `rowsReader`.
 */
export function rowsStreamer(storage: Storage, store: DatasetStore, policies: RowPolicies): DatasetCatalog['stream'] {
  return async function* (principal, orgId, datasetId, options = {}) {
    const pageSize = options.pageSize ?? ROWS_STREAM_PAGE_MAX;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > ROWS_STREAM_PAGE_MAX) throw new RangeError(`pageSize must be an integer from 1 to ${ROWS_STREAM_PAGE_MAX}`);
    const dataset = await store.get(orgId, datasetId);
    yield* streamRows(storage, dataset, await visibilityOf(policies, principal, dataset), pageSize);
  };
}

/**
 * How a stored value of `column` reaches the caller: the mask in place of a PII value it may not
 * see (null stays null), else decoded. The one rule of every read path.
 */
function cellOf(storage: Storage, column: DatasetColumn, visibility: Visibility): (value: unknown) => unknown {
  const { decode } = storage.dataTables;
  const type = column.type;
  if (column.pii && !visibility.seePii) return (value) => (value !== null ? PII_MASK : decode(type, value));
  return (value) => decode(type, value);
}

/**
 * Every row of the dataset the caller may see (row policies applied, PII masked and values decoded
 * as `queryRows` does), in row order, in keyset pages of `pageSize` rows on the hidden row id, each
 * page a long read by column. Unlike `queryRows`, a page is not bounded in bytes: it is for code
 * of the platform reading a whole dataset, not an answer to a client. Pages come by column
 * (`RowsBlock`) as the database's reader gave them, each value decoded in place.
 */
export async function* streamRows(storage: Storage, dataset: Dataset, visibility: Visibility, pageSize: number): AsyncGenerator<RowsBlock> {
  const columns = dataset.columns;
  const cells = columns.map((c) => cellOf(storage, c, visibility));
  const names = columns.map((c) => c.name);
  const selected = sql.join([sql.id(ROW_ID), ...names.map((name) => sql.id(name))]);
  const table = storage.dataTables.ref(dataset.org_id, dataset.table_name);
  let after: number | null = null;
  for (;;) {
    const conditions: RawBuilder<unknown>[] = visibility.scope ? [visibility.scope] : [];
    if (after !== null) conditions.push(sql`${sql.id(ROW_ID)} > ${after}`);
    const where = conditions.length ? sql`where ${sql.join(conditions, sql` and `)}` : sql``;
    const query = sql`select ${selected} from ${table} ${where} order by ${sql.id(ROW_ID)} asc limit ${pageSize}`.compile(storage.db);
    const { values: [rowIds, ...values], rows } = await storage.longReadColumns(dataset.org_id, query);
    if (rows === 0) return;
    for (const [i, column] of values.entries()) {
      const cell = cells[i];
      for (let r = 0; r < rows; r += 1) column[r] = cell(column[r]);
    }
    yield { columns: names, values, rows };
    if (rows < pageSize) return;
    after = Number(rowIds[rows - 1]);
  }
}

/**
 * Every row of a dataset (masked as for `queryRows`), page by page in row order: for exports. The
 * next page is read while the caller writes out this one.
 */
export async function* allRows(storage: Storage, dataset: Dataset, visibility: Visibility, maxPageBytes: number, pageSize = 1000): AsyncGenerator<RowsPage> {
  const read = (cursor?: string) => queryRows(storage, dataset, { limit: pageSize, cursor }, visibility, maxPageBytes);
  let next: Promise<RowsPage> | null = read();
  while (next) {
    const page: RowsPage = await next;
    next = page.next_cursor ? read(page.next_cursor) : null;
    // A page read ahead whose caller stopped (a client gone) must not end as an unhandled rejection.
    next?.catch(() => undefined);
    yield page;
  }
}

const decodeCursor = (cursor: string) => pageCursor.decode<{ after?: number; offset?: number }>(cursor, (value) => Number.isSafeInteger(value.after) || Number.isSafeInteger(value.offset));

/** A sum as a balanced tree: a thousand columns added one after another pass SQLite's expression depth limit. */
function sumOf(terms: RawBuilder<unknown>[]): RawBuilder<unknown> {
  if (terms.length === 0) return sql`0`;
  if (terms.length === 1) return terms[0];
  const half = Math.ceil(terms.length / 2);
  return sql`(${sumOf(terms.slice(0, half))} + ${sumOf(terms.slice(half))})`;
}

/** Columns the page query adds, named with a control character, which no dataset column's name holds. */
const ROW_BYTES = '\u0001row_bytes';
const BYTES_THROUGH = '\u0001bytes_through';
const FETCHED = '\u0001fetched';

/**
 * A page of a dataset's rows, pushed down to the database: column selection, filters, sort and
 * paging. Without a sort the cursor is keyset on the hidden row id (stable under appends); with
 * a sort it carries an offset. A page holds at most `limit` rows and, past its first row, no more
 * than about `maxPageBytes` of values: the database counts each row's bytes before sending it
 * (masked values as the mask), so a page of wide values never fills memory; the rest follows on
 * the next page. A page of a big dataset may take long to sort or filter: it is a long read
 * (`Storage.longReads`), off the event loop.
 */
export async function queryRows(storage: Storage, dataset: Dataset, request: RowsQuery, visibility: Visibility, maxPageBytes: number): Promise<RowsPage> {
  const masked = (c: DatasetColumn) => c.pii && !visibility.seePii;
  const column = columnLookup(dataset.columns);
  /** Filtering or sorting on a masked column would reveal its values one comparison at a time. */
  const comparable = (name: string, where: string): DatasetColumn => {
    const found = column(name, where);
    if (masked(found)) throw problems.forbidden(`column "${name}" holds personal data: filtering or sorting on it needs the capability "datasets.pii.read"`);
    return found;
  };
  const selected = request.columns ? request.columns.split(',').map((n) => column(n.trim(), 'query.columns')) : dataset.columns;

  const conditions: RawBuilder<unknown>[] = (request.filter ?? []).map((text) => compileFilter(text, (name) => comparable(name, 'query.filter'), 'query.filter'));
  for (const { column: name, values } of request.oneOf ?? []) conditions.push(compileOneOf(comparable(name, 'query.filter'), values, 'query.filter'));
  if (visibility.scope) conditions.push(visibility.scope);

  const order = (request.sort ?? '')
    .split(',')
    .filter(Boolean)
    .map((term) => {
      const descending = term.startsWith('-');
      const target = comparable(descending ? term.slice(1) : term, 'query.sort');
      // Empty values last in both directions, on both adapters (their defaults differ).
      return sql`${sql.id(target.name)} ${sql.raw(descending ? 'desc' : 'asc')} nulls last`;
    });

  const cursor = request.cursor ? decodeCursor(request.cursor) : {};
  const keyset = order.length === 0;
  if (keyset && cursor.after !== undefined) conditions.push(sql`${sql.id(ROW_ID)} > ${cursor.after}`);
  const offset = keyset ? 0 : (cursor.offset ?? request.offset ?? 0);
  const where = conditions.length ? sql`where ${sql.join(conditions, sql` and `)}` : sql``;
  // Sort columns come along (unselected ones too): the layers above order by them again.
  const sorted = (request.sort ?? '').split(',').filter(Boolean).map((term) => column(term.replace(/^-/, ''), 'query.sort'));
  const carried = [...new Map([...selected, ...sorted].map((c) => [c.name, c])).values()];
  const names = sql.join([sql.id(ROW_ID), ...carried.map((c) => sql.id(c.name))]);
  const orderBy = sql.join([...order, sql`${sql.id(ROW_ID)} asc`]);
  const bytes = sumOf(selected.map((c) => (masked(c) ? sql`${PII_MASK.length}` : storage.dataTables.textBytes(sql.id(c.name)))));
  const fetched = sql`select ${names}, ${bytes} as ${sql.id(ROW_BYTES)} from ${storage.dataTables.ref(dataset.org_id, dataset.table_name)} ${where} order by ${orderBy} limit ${request.limit + 1} offset ${offset}`;
  const counted = sql`select p.*, sum(${sql.id(ROW_BYTES)}) over (order by ${orderBy} rows between unbounded preceding and current row) as ${sql.id(BYTES_THROUGH)}, count(*) over () as ${sql.id(FETCHED)} from (${fetched}) as p`;
  // Rows that start within the budget: the first always, then as many as fit.
  const result = await sql<Record<string, unknown>>`select * from (${counted}) as w where ${sql.id(BYTES_THROUGH)} - ${sql.id(ROW_BYTES)} < ${maxPageBytes} order by ${orderBy}`.execute(storage.longReads(dataset.org_id));

  const page = result.rows.slice(0, request.limit);
  const more = Number(result.rows[0]?.[FETCHED] ?? 0) > page.length;
  const cells = selected.map((c) => cellOf(storage, c, visibility));
  const rows = page.map((row) => Object.fromEntries(selected.map((c, i) => [c.name, cells[i](row[c.name])])));
  const last = page.at(-1);
  const next = !more || !last ? null : keyset ? pageCursor.encode({ after: Number(last[ROW_ID]) }) : pageCursor.encode({ offset: offset + page.length });
  return { columns: selected.map((c) => ({ name: c.name, type: c.type, masked: masked(c) })), rows, next_cursor: next };
}
