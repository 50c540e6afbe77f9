import { sql, type Kysely, type RawBuilder } from 'kysely';
import { ROW_ID, type Storage } from '../../storage/index.ts';
import { PII_MASK, type DatasetCatalog, type DatasetInfo } from '../datasets/public.ts';
import type { RuleDefinition } from './rule-types.ts';

export const SAMPLE_ROWS = 10;

export interface Evaluation {
  status: 'passed' | 'failed' | 'error';
  failing_rows: number;
  /** Up to ten failing rows, PII columns masked: results are kept, personal data is not. */
  sample: Record<string, unknown>[];
  message: string;
  /** The measured value of dataset-level rules (row count, age in hours). */
  observed: number | null;
}

/**
 * Evaluates one rule against a dataset in the database: a row-level rule is a condition that
 * selects failing rows (counted, and sampled); a dataset-level rule compares one measure. Its
 * queries go through `db` (the caller bounds their time with it).
 */
export async function evaluate(storage: Storage, db: Kysely<any>, catalog: DatasetCatalog, dataset: DatasetInfo, rule: RuleDefinition, scope: RawBuilder<boolean> | null): Promise<Evaluation> {
  // Under row policies a rule sees (and samples) only the rows its caller may read.
  const table = scope ? sql`(select * from ${catalog.table(dataset)} where ${scope}) as scoped` : catalog.table(dataset);
  const rowCount = scope ? Number((await sql<{ n: unknown }>`select count(*) as n from ${table}`.execute(db)).rows[0].n) : dataset.row_count;
  const column = 'column' in rule.params && rule.params.column !== undefined ? dataset.columns.find((c) => c.name === (rule.params as { column: string }).column) : undefined;
  if ('column' in rule.params && rule.params.column !== undefined && !column) {
    return { status: 'error', failing_rows: 0, sample: [], message: `column "${rule.params.column}" is no longer in the dataset`, observed: null };
  }

  if (rule.type === 'row_count_between') {
    const observed = rowCount;
    const { min, max } = rule.params;
    const ok = (min === undefined || observed >= min) && (max === undefined || observed <= max);
    return { status: ok ? 'passed' : 'failed', failing_rows: 0, sample: [], message: `${observed} rows (expected ${min ?? '-∞'} … ${max ?? '∞'})`, observed };
  }
  if (rule.type === 'freshness') {
    let latest: string | null;
    if (column) {
      if (column.type !== 'date' && column.type !== 'timestamp') return { status: 'error', failing_rows: 0, sample: [], message: `column "${column.name}" is not a date or timestamp`, observed: null };
      const row = (await sql<{ latest: unknown }>`select max(${sql.id(column.name)}) as latest from ${table}`.execute(db)).rows[0];
      latest = row.latest === null ? null : String(catalog.decode(column.type, row.latest));
    } else {
      latest = dataset.updated_at;
    }
    if (latest === null) return { status: 'failed', failing_rows: 0, sample: [], message: 'no value to measure freshness by', observed: null };
    const ageHours = (Date.now() - Date.parse(latest.length === 10 ? `${latest}T00:00:00Z` : latest)) / 3_600_000;
    const ok = ageHours <= rule.params.max_age_hours;
    return { status: ok ? 'passed' : 'failed', failing_rows: 0, sample: [], message: `newest value ${latest} is ${ageHours.toFixed(1)} h old (at most ${rule.params.max_age_hours} h)`, observed: Math.round(ageHours * 1000) / 1000 };
  }

  const ref = sql.id(column!.name);
  let failing: RawBuilder<unknown>;
  switch (rule.type) {
    case 'not_null':
      failing = sql`${ref} is null`;
      break;
    case 'unique':
      failing = sql`${ref} in (select ${ref} from ${table} where ${ref} is not null group by ${ref} having count(*) > 1)`;
      break;
    case 'range': {
      const { min, max } = rule.params;
      const below = min === undefined ? sql`1 = 0` : sql`${ref} < ${min}`;
      const above = max === undefined ? sql`1 = 0` : sql`${ref} > ${max}`;
      failing = sql`(${below} or ${above})`;
      break;
    }
    case 'pattern':
      failing = sql`${ref} is not null and not ${storage.dataTables.matches(sql`cast(${ref} as text)`, rule.params.pattern)}`;
      break;
    case 'allowed_values':
      failing = sql`${ref} is not null and ${ref} not in (${sql.join(rule.params.values)})`;
      break;
    case 'custom_sql':
      throw new Error('custom SQL rules run through the governed SQL path, not here');
  }
  const { count } = (await sql<{ count: unknown }>`select count(*) as count from ${table} where ${failing}`.execute(db)).rows[0];
  const failingRows = Number(count);
  const sampleRows = failingRows
    ? (await sql<Record<string, unknown>>`select * from ${table} where ${failing} order by ${sql.id(ROW_ID)} limit ${SAMPLE_ROWS}`.execute(db)).rows
    : [];
  const sample = sampleRows.map((row) =>
    Object.fromEntries(dataset.columns.map((c) => [c.name, c.pii && row[c.name] !== null ? PII_MASK : catalog.decode(c.type, row[c.name])])),
  );
  return {
    status: failingRows ? 'failed' : 'passed',
    failing_rows: failingRows,
    sample,
    message: failingRows ? `${failingRows} of ${rowCount} rows fail` : `all ${rowCount} rows pass`,
    observed: null,
  };
}
