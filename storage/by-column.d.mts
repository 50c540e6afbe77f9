export function byColumn(width: number, rows: unknown[][]): unknown[][];
