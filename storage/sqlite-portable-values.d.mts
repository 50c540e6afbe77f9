import type Database from 'better-sqlite3';

/**
 * Parameters as better-sqlite3 binds them: booleans as 1/0 and Dates as ISO strings (it binds
 * neither). Kysely passes the parameters as one array; direct callers may pass them one by one.
 */
export declare const bindAll: (params: unknown[]) => unknown[];

/** The positions and names of a statement's result columns declared `boolean` (SQLite stores them as 1/0). */
export declare function booleanColumns(statement: Database.Statement): { index: number; name: string }[];

/** true/false for a stored 1/0; anything else (null) as it is. */
export declare const asBoolean: (value: unknown) => unknown;
