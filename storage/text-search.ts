import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quoteIdentifier } from './data-tables.ts';

/**
 * A condition true when `expression`, as text, contains `text` ignoring case, with `%` and `_`
 * taken literally. LIKE with an explicit escape character means the same on SQLite and Postgres.
 */
export function containsText(expression: RawBuilder<unknown>, text: string): RawBuilder<boolean> {
  const pattern = `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sql<boolean>`lower(cast(${expression} as text)) like ${pattern} escape '\\'`;
}

/** A match of a full-text search: the row's id, and how well it matched (higher is better). */
export interface FullTextHit {
  id: number;
  score: number;
}

/**
 * Full-text search over one text column of a plugin's table (its integer `id` the key). A migration
 * makes the column searchable; a search ranks the rows matching any of the query's words, stemmed
 * (English), best first. Each adapter uses its database's own engine: SQLite's FTS5 with BM25,
 * Postgres's text search with ts_rank_cd.
 */
export interface FullTextSearch {
  create(db: Kysely<any>, table: string, column: string): Promise<void>;
  drop(db: Kysely<any>, table: string, column: string): Promise<void>;
  /**
   * Among the rows whose columns equal `where`, those matching, at most `limit`, read through `db`:
   * `longReads(orgId)` for a search on the request path (on SQLite, off the event loop).
   */
  search(db: Kysely<any>, table: string, column: string, query: string, options: { where: Record<string, string | number>; limit: number }): Promise<FullTextHit[]>;
}

/** The query's words, lower-cased, once each: letters and digits only, so nothing of the query reaches the engine's own syntax. */
export function searchWords(query: string, max = 64): string[] {
  return [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])].slice(0, max);
}

const equalities = (alias: string, where: Record<string, string | number>) =>
  Object.entries(where).map(([column, value]) => sql`${sql.ref(`${alias}.${column}`)} = ${value}`);

/** SQLite: an FTS5 table with the column as external content, kept in step by triggers. */
export function sqliteFullText(): FullTextSearch {
  const fts = (table: string) => `${table}_fts`;
  return {
    async create(trx, table, column) {
      const [t, f, c] = [quoteIdentifier(table), quoteIdentifier(fts(table)), quoteIdentifier(column)];
      await sql.raw(`create virtual table ${f} using fts5(${c}, content=${t}, content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')`).execute(trx);
      await sql.raw(`create trigger ${quoteIdentifier(`${fts(table)}_insert`)} after insert on ${t} begin insert into ${f}(rowid, ${c}) values (new.id, new.${c}); end`).execute(trx);
      await sql.raw(`create trigger ${quoteIdentifier(`${fts(table)}_delete`)} after delete on ${t} begin insert into ${f}(${f}, rowid, ${c}) values ('delete', old.id, old.${c}); end`).execute(trx);
      await sql
        .raw(`create trigger ${quoteIdentifier(`${fts(table)}_update`)} after update of ${c} on ${t} begin insert into ${f}(${f}, rowid, ${c}) values ('delete', old.id, old.${c}); insert into ${f}(rowid, ${c}) values (new.id, new.${c}); end`)
        .execute(trx);
      await sql.raw(`insert into ${f}(${f}) values ('rebuild')`).execute(trx);
    },
    async drop(trx, table) {
      for (const suffix of ['insert', 'delete', 'update']) await sql.raw(`drop trigger if exists ${quoteIdentifier(`${fts(table)}_${suffix}`)}`).execute(trx);
      await sql.raw(`drop table if exists ${quoteIdentifier(fts(table))}`).execute(trx);
    },
    async search(db, table, _column, query, { where, limit }) {
      const words = searchWords(query);
      if (!words.length) return [];
      // Each word a quoted FTS5 string, ORed: BM25 ranks the rows holding more of the rarer words first.
      const match = words.map((w) => `"${w}"`).join(' OR ');
      const f = sql.table(fts(table));
      const conditions = [sql`${f} match ${match}`, ...equalities('t', where)];
      const { rows } = await sql<{ id: number; rank: number }>`select t.id as id, bm25(${f}) as rank from ${f} join ${sql.table(table)} as t on t.id = ${f}.rowid where ${sql.join(conditions, sql` and `)} order by rank limit ${limit}`.execute(db);
      return rows.map((r) => ({ id: Number(r.id), score: -Number(r.rank) }));
    },
  };
}

/**
 * Postgres: the column's English tsvector kept in a stored generated column (`<column>_tsv`), with a
 * GIN index on it; ranked by ts_rank_cd. Stored, so a search ranks the rows it matched without
 * parsing their text again.
 */
export function postgresFullText(): FullTextSearch {
  const vectorColumn = (column: string) => `${column}_tsv`;
  return {
    async create(trx, table, column) {
      const [t, c, v] = [quoteIdentifier(table), quoteIdentifier(column), quoteIdentifier(vectorColumn(column))];
      await sql.raw(`alter table ${t} add column ${v} tsvector generated always as (to_tsvector('english', ${c})) stored`).execute(trx);
      await sql.raw(`create index ${quoteIdentifier(`${table}_${column}_fts`)} on ${t} using gin (${v})`).execute(trx);
    },
    async drop(trx, table, column) {
      await sql.raw(`drop index if exists ${quoteIdentifier(`${table}_${column}_fts`)}`).execute(trx);
      await sql.raw(`alter table ${quoteIdentifier(table)} drop column if exists ${quoteIdentifier(vectorColumn(column))}`).execute(trx);
    },
    async search(db, table, column, query, { where, limit }) {
      const words = searchWords(query);
      if (!words.length) return [];
      const vector = sql.ref(`t.${vectorColumn(column)}`);
      const conditions = [sql`${vector} @@ q`, ...equalities('t', where)];
      const { rows } = await sql<{ id: number; score: number }>`select t.id as id, ts_rank_cd(${vector}, q) as score from ${sql.table(table)} as t, to_tsquery('english', ${words.join(' | ')}) as q where ${sql.join(conditions, sql` and `)} order by score desc, t.id limit ${limit}`.execute(db);
      return rows.map((r) => ({ id: Number(r.id), score: Number(r.score) }));
    },
  };
}
