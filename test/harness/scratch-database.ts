import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { governedRolePrefix } from '../../storage/index.ts';
import { POSTGRES_URL, type DialectName } from './dialects.ts';

export interface ScratchDatabase {
  /** DATABASE_URL of the scratch database. */
  url: string;
  drop(): Promise<void>;
}

/**
 * A database no other test touches: a fresh SQLite file, or a fresh Postgres database created on
 * the server TEST_DATABASE_URL points at and dropped afterwards.
 */
export async function createScratchDatabase(dialect: DialectName, dir: string): Promise<ScratchDatabase> {
  if (dialect === 'sqlite') {
    const file = path.join(dir, `scratch-${crypto.randomUUID()}.db`);
    return { url: `sqlite:${file}`, drop: async () => undefined };
  }
  if (!POSTGRES_URL) throw new Error('TEST_DATABASE_URL is not set');
  const name = `dp_test_${crypto.randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  // Swap the database name only: the URL may name a socket directory as its (percent-encoded) host.
  const url = POSTGRES_URL.replace(/\/[^/?]*(\?.*)?$/, `/${name}$1`);
  return {
    url,
    async drop() {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
        // The roles governed SQL ran under belong to the cluster, not the database: drop them too.
        const roles = await client.query<{ rolname: string }>('select rolname from pg_roles where starts_with(rolname, $1)', [`${governedRolePrefix(name, 'public')}_`]);
        for (const { rolname } of roles.rows) await client.query(`drop role if exists "${rolname}"`);
      } finally {
        await client.end();
      }
    },
  };
}

/** A temporary directory removed by the returned function. */
export function tempDir(prefix = 'dp-test-'): { dir: string; remove(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
