import { sql, type RawBuilder } from 'kysely';
import { problems } from '../../kernel/plugin-api.ts';
import { ROW_ID, type DataColumn } from '../../storage/index.ts';
import type { ColumnOrigin, PlannedOutput, RecipeDataset } from '../pipeline/public.ts';

/** The input's column of that name; an unknown one is a 400 naming the parameter at `where` (under body.params). */
export function columnOf(input: RecipeDataset, name: string, where: string): DataColumn {
  const column = input.columns.find((c) => c.name === name);
  if (!column) throw problems.badRequest(`dataset "${input.name}" has no column "${name}"`, [{ path: `body.params.${where}`, message: `unknown column ${name}` }]);
  return column;
}

/** The input as a table reference in a recipe's SELECT: by its dataset name, as governed SQL names it. */
export const tableOf = (input: RecipeDataset) => sql.id(input.name);

/** Every column of input `index`, as it is. */
export function passThrough(input: RecipeDataset, index: number): PlannedOutput['columns'] {
  return input.columns.map((c) => ({ ...c, origin: identity(index, c.name) }));
}

export const identity = (input: number, column: string): ColumnOrigin => ({ from: [{ input, column }], transformation: 'identity' });

/** A select list naming each column. */
export const selectList = (columns: { name: string }[]): RawBuilder<unknown> => sql.join(columns.map((c) => sql.id(c.name)));

/** Output column names must be unique (the output is a table); a repeated one is a 400 naming `where`. */
export function uniqueNames(columns: { name: string }[], where: string): void {
  const seen = new Set<string>();
  for (const column of columns) {
    const key = column.name.toLowerCase();
    if (seen.has(key)) throw problems.badRequest(`the output would have two columns named "${column.name}"`, [{ path: `body.params.${where}`, message: `duplicate output column ${column.name}` }]);
    seen.add(key);
  }
}

/** Postgres truncates identifiers past 63 bytes: dataset column names are kept within that on both adapters. */
const MAX_NAME_BYTES = 63;

/** Why a dataset column may not have this name (the rules of the datasets plugin), or null when it may. */
export function columnNameProblem(name: string): string | null {
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) return `a column name may have at most ${MAX_NAME_BYTES} bytes`;
  if (name.toLowerCase() === ROW_ID) return `"${ROW_ID}" is reserved`;
  if (/[\u0000-\u001f]/.test(name)) return 'a column name may not contain control characters';
  return null;
}

/** An output column name given in the params (`as`); one a dataset column may not have is a 400 naming `where` (under body.params). */
export function outputName(name: string, where: string): string {
  const problem = columnNameProblem(name);
  if (problem) throw problems.badRequest(`output column ${JSON.stringify(name)}: ${problem}`, [{ path: `body.params.${where}`, message: problem }]);
  return name;
}
