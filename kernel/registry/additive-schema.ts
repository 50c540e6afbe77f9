import type { TableSnapshot } from '../../storage/index.ts';

/**
 * What a schema change did that the version still serving may not survive: a table, column or
 * index it relies on gone (dropped or renamed), a column of another type or newly NOT NULL, a new
 * NOT NULL column without a default in a table it inserts into. Empty when the change only adds
 * (tables, nullable or defaulted columns, indexes), which a hot reload may apply while the
 * previous version keeps serving.
 */
export function nonAdditiveChanges(before: TableSnapshot[], after: TableSnapshot[]): string[] {
  const changes: string[] = [];
  const afterByName = new Map(after.map((table) => [table.name, table]));
  for (const old of before) {
    const now = afterByName.get(old.name);
    if (!now) {
      changes.push(`drops or renames table ${old.name}`);
      continue;
    }
    const columns = new Map(now.columns.map((c) => [c.name, c]));
    for (const column of old.columns) {
      const current = columns.get(column.name);
      if (!current) changes.push(`drops or renames column ${old.name}.${column.name}`);
      else if (current.type !== column.type) changes.push(`changes the type of ${old.name}.${column.name} from ${column.type} to ${current.type}`);
      else if (column.nullable && !current.nullable) changes.push(`makes ${old.name}.${column.name} NOT NULL`);
    }
    const known = new Set(old.columns.map((c) => c.name));
    for (const column of now.columns) {
      if (!known.has(column.name) && !column.nullable && !column.hasDefault) changes.push(`adds ${old.name}.${column.name} NOT NULL without a default`);
    }
    const indexes = new Set(now.indexes);
    for (const index of old.indexes) if (!indexes.has(index)) changes.push(`drops index ${index} of ${old.name}`);
  }
  return changes;
}
