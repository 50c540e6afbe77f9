import pg from 'pg';

/**
 * Runs once before the suite. Without TEST_DATABASE_URL it says, in one clear line, that the
 * Postgres half is skipped; with it, it proves the server answers so a bad URL fails fast.
 */
export default async function setup() {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) {
    process.stdout.write('\nPostgres tests SKIPPED: TEST_DATABASE_URL is not set (only the SQLite adapter is tested)\n\n');
    return;
  }
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.query('select 1');
  } catch (err) {
    throw new Error(`TEST_DATABASE_URL is set but Postgres does not answer: ${(err as Error).message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}
