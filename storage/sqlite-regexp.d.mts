import type Database from 'better-sqlite3';

/** SQLite has the REGEXP operator but no implementation: this one uses JavaScript regular expressions. */
export declare function registerRegexp(database: Database.Database): void;
