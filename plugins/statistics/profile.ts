import type { ColumnStatistics, DataColumnType } from '../../storage/index.ts';

export interface ColumnProfile {
  name: string;
  type: DataColumnType;
  count: number;
  nulls: number;
  distinct: number;
  min: unknown;
  max: unknown;
  mean: number | null;
  stddev: number | null;
  quantiles: { p25: unknown; p50: unknown; p75: unknown } | null;
  top_values: { value: unknown; count: number }[];
  histogram: { from: number; to: number; count: number }[] | null;
}

type Decode = (type: DataColumnType, value: unknown) => unknown;

/**
 * A column's profile as the API answers it, from the statistics the database computed
 * (`DataTables.profile`): stored values decoded, nulls counted against the rows profiled.
 */
export function columnProfile(column: { name: string; type: DataColumnType }, statistics: ColumnStatistics, rowCount: number, decode: Decode): ColumnProfile {
  const value = (stored: unknown) => decode(column.type, stored);
  const { quartiles } = statistics;
  return {
    name: column.name,
    type: column.type,
    count: statistics.count,
    nulls: rowCount - statistics.count,
    distinct: statistics.distinct,
    min: value(statistics.min),
    max: value(statistics.max),
    mean: statistics.mean,
    stddev: statistics.stddev,
    quantiles: quartiles && { p25: value(quartiles.p25), p50: value(quartiles.p50), p75: value(quartiles.p75) },
    // JSON values are grouped by their text.
    top_values: statistics.topValues.map((top) => ({ value: column.type === 'json' ? JSON.parse(String(top.value)) : value(top.value), count: top.count })),
    histogram: statistics.histogram,
  };
}
