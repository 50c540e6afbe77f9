export function rowFromValues(columns: string[]): (values: unknown[]) => Record<string, unknown>;
export function rowFromColumns(columns: string[]): (values: unknown[][], row: number) => Record<string, unknown>;
