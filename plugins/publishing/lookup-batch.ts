import { problems } from '../../kernel/plugin-api.ts';
import { ROWS_PAGE_MAX, type DatasetInfo, type RowsPage, type RowsQuery } from '../datasets/public.ts';

type Row = Record<string, unknown>;

/** Key column types whose values read back from a row exactly as the key was typed (a date or a timestamp may be written otherwise). */
const EXACT_TYPES = new Set(['integer', 'string']);

/** The 409 of a lookup answering one row per key (`on_multiple` error) when a key matches several. */
export const severalRows = (at: string) => problems.conflict(`${at}: more than one row matches this key (the endpoint answers one row per key)`);

export interface BatchByOneColumn {
  /** The one key column the caller gives, and each key's typed value of it, in input order. */
  column: DatasetInfo['columns'][number];
  values: unknown[];
  /** Rows per key the endpoint answers at most (`on_multiple` first: 1; error: 2, so that a second shows). */
  perKey: number;
  onMultiple: 'all' | 'first' | 'error';
  /** The endpoint's filters. */
  filters: string[];
  /** The key's fixed columns and values. */
  fixed: NonNullable<RowsQuery['oneOf']>;
  /** The columns answered (all when absent). */
  columns?: string[];
  read(query: RowsQuery): Promise<RowsPage>;
}

/**
 * A batch of keys of one column answered by one read, `column in (…)`, its rows grouped back by
 * key in row order, instead of a read per key. Null when one read cannot answer it exactly, and the
 * caller reads key by key: a key column holding personal data (it may read masked) or of a type
 * whose values read back in another form, a null key (`in` matches no null), or as many matching
 * rows as one page holds (a key matching many rows could crowd another out of it).
 */
export async function readBatchAtOnce(batch: BatchByOneColumn): Promise<Row[][] | null> {
  const { column, values, perKey } = batch;
  if (column.pii || !EXACT_TYPES.has(column.type) || values.some((v) => v === null)) return null;
  const distinct = [...new Set(values.map(String))];
  // Enough rows to tell every key's share (and a second row of `error`) when they fit in a page;
  // a page that comes back short holds every matching row.
  const limit = Math.min(ROWS_PAGE_MAX, distinct.length * perKey + 1);
  const answered = batch.columns && !batch.columns.includes(column.name) ? [...batch.columns, column.name] : batch.columns;
  const page = await batch.read({ limit, filter: batch.filters, oneOf: [...batch.fixed, { column: column.name, values: distinct }], columns: answered?.join(',') });
  if (page.next_cursor !== null || page.rows.length >= limit) return null;
  const byKey = new Map<string, Row[]>();
  for (const row of page.rows) {
    const key = String(row[column.name]);
    if (answered !== batch.columns) delete row[column.name];
    const rows = byKey.get(key);
    if (rows) rows.push(row);
    else byKey.set(key, [row]);
  }
  return values.map((value, i) => {
    const rows = byKey.get(String(value)) ?? [];
    if (batch.onMultiple === 'error' && rows.length > 1) throw severalRows(`body.keys.${i}`);
    return rows.slice(0, perKey);
  });
}
