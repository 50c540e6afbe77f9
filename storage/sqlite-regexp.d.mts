import type Database from 'better-sqlite3';
import type { RE2JS } from 're2js';

/** `pattern` compiled by RE2 (linear-time matching), from a bounded cache; throws RE2's syntax error. */
export declare function compileRegexp(pattern: string): RE2JS;

/** SQLite has the REGEXP operator but no implementation: this one is RE2 (see `compileRegexp`). */
export declare function registerRegexp(database: Database.Database): void;
