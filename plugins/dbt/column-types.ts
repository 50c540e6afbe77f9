import type { DataColumnType } from '../../storage/index.ts';

/**
 * A warehouse's column type (catalog.json, a YAML `data_type`, a seed's `column_types`) as the
 * platform's: by the type's leading word, as Postgres, Snowflake, BigQuery, DuckDB, Databricks and
 * SQL Server spell them (`NUMBER(38,0)` is an integer, `NUMBER(10,2)` a number). Unknown: string.
 */
export function platformType(warehouseType: string): DataColumnType {
  const type = warehouseType.trim().toLowerCase();
  const word = /^[a-z ]+/.exec(type)?.[0].trim() ?? '';
  if (/^(number|numeric|decimal)\s*\(\s*\d+\s*,\s*0\s*\)$/.test(type)) return 'integer';
  if (/^(u?int\d*|integer|bigint|smallint|tinyint|hugeint|ubigint|byteint|long|short|serial|bigserial)$/.test(word)) return 'integer';
  if (/^(numeric|decimal|number|float\d*|double|double precision|real|bignumeric|money)$/.test(word)) return 'number';
  if (/^(bool|boolean|bit)$/.test(word)) return 'boolean';
  if (word === 'date') return 'date';
  if (/^(timestamp|timestamptz|datetime|datetime2|timestamp_ntz|timestamp_tz|timestamp_ltz|smalldatetime|datetimeoffset)/.test(word)) return 'timestamp';
  if (/^(json|jsonb|variant|object|struct|array|map|super)/.test(word)) return 'json';
  return 'string';
}
