/** Says once, clearly, when the Postgres half of the suite will not run. */
export default function setup() {
  if (!process.env.TEST_DATABASE_URL) {
    process.stdout.write('\nPostgres tests SKIPPED: TEST_DATABASE_URL is not set (only the SQLite adapter is tested)\n\n');
  }
}
