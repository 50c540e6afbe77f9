import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, until, type TestKernel } from '../harness/index.ts';

// SQLite only: checkpoints are a WAL matter. No connection checkpoints on commit (the server's would
// do it on its event loop); a thread of the storage's copies the WAL back into the file.
describe('SQLite checkpoints', () => {
  let t: TestKernel;
  let file: string;

  beforeAll(async () => {
    t = await startTestKernel({ dialect: 'sqlite' });
    file = t.kernel.storage.description.slice('sqlite:'.length);
  });
  afterAll(async () => t?.stop());

  it('copies committed pages into the database file within moments, though no connection checkpoints on commit', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'WAL', name: 'WAL' } });
    const created = await t.request('POST', '/api/datasets', { body: { name: 'wide', project_id: project.body.id, columns: [{ name: 'text', type: 'string' }] } });
    const before = fs.statSync(file).size;
    const rows = Array.from({ length: 20_000 }, (_, i) => `row ${i} ${'x'.repeat(200)}`).join('\n');
    expect((await t.request('POST', `/api/datasets/${created.body.id}/data`, { body: `text\n${rows}\n`, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    // About 4 MB of rows: in the file once checkpointed (the WAL alone holds them until then).
    expect(await until(async () => fs.statSync(file).size, (size) => size > before + 3_000_000)).toBeGreaterThan(before + 3_000_000);
  });
});
