import Database from 'better-sqlite3';
import pg from 'pg';

/**
 * One statement through a driver connection of its own, as a console or another instance would
 * write: `description` is the storage's (`Storage.description`, a file or a server URL without a
 * password, which the test servers do not ask for).
 */
export async function writeOutsideThePlatform(description: string, statement: string): Promise<void> {
  if (description.startsWith('sqlite:')) {
    const database = new Database(description.slice('sqlite:'.length));
    try {
      database.prepare(statement).run();
    } finally {
      database.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: description });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
