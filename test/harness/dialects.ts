/**
 * The storage adapters a suite runs against: SQLite always, Postgres when TEST_DATABASE_URL is set
 * (CI sets it). Suites loop over this list so every behaviour is checked on both.
 */
export type DialectName = 'sqlite' | 'postgres';

export const POSTGRES_URL = process.env.TEST_DATABASE_URL || undefined;

export const DIALECTS: DialectName[] = POSTGRES_URL ? ['sqlite', 'postgres'] : ['sqlite'];
