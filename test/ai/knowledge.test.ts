import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, until, type TestKernel } from '../harness/index.ts';
import { docxOf, formWith, pdfOf, zipOf } from '../harness/documents.ts';
import { startOpenAiServer, type LlmServer } from '../harness/llm-servers.ts';
import { expectProblem, sseEvents } from '../harness/answers.ts';

const TOWERS = [
  'The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It was designed by the engineering company of Gustave Eiffel and completed in 1889 for the World\u2019s Fair.',
  'The tower is 330 metres tall. For 41 years it was the tallest man-made structure in the world, until the Chrysler Building in New York City was finished in 1930.',
];
const RIVERS = '# Rivers\n\nThe Loire is the longest river in France, running 1,006 kilometres to the Atlantic Ocean.\n\nThe Seine flows through Paris and reaches the English Channel at Le Havre.\n';
const COFFEE_HTML = '<html><head><script>steal()</script><style>p{}</style></head><body><h1>Coffee</h1><p>Espresso is brewed by forcing hot water through finely ground coffee beans.</p></body></html>';

/** Issue 19, "Knowledge": documents and knowledge bases through HTTP on both adapters; embeddings and answers from a model server on loopback. */
describe.each(DIALECTS)('knowledge (%s)', (dialect) => {
  let t: TestKernel;
  let openai: LlmServer;
  let projectId: number;
  let connectionId: number;
  const docs: Record<string, number> = {};

  const upload = (name: string, type: string, content: Buffer | string, fields?: Record<string, string>) => {
    const form = formWith({ name, type, content }, fields);
    return t.request('POST', '/api/knowledge/documents', { body: form.body, headers: { 'content-type': form.contentType } });
  };
  const runDone = (runId: number) => until(() => t.request('GET', `/api/pipeline/runs/${runId}`), (r) => ['succeeded', 'failed', 'cancelled'].includes(r.body.status), 20_000);

  beforeAll(async () => {
    openai = await startOpenAiServer();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', KNOWLEDGE_UPLOAD_LIMIT: '256kb', WORKER_POLL_MS: '50', EVENTS_POLL_MS: '50' } });
    projectId = (await t.request('POST', '/api/projects', { body: { key: 'KB', name: 'Knowledge' } })).body.id;
    connectionId = (await t.request('POST', '/api/llm-mesh/connections', { body: { name: 'kb-model', provider: 'openai_compatible', config: { base_url: `${openai.url}/v1`, default_model: 'gpt-test' } } })).body.id;
  });
  afterAll(async () => {
    await t?.stop();
    await openai?.close();
  });

  it('reads text, Markdown, HTML, CSV, PDF and DOCX documents, checked against their bytes', async () => {
    const uploads: [string, string, string, Buffer | string, string][] = [
      ['towers', 'towers.pdf', 'application/pdf', pdfOf(TOWERS), 'Gustave Eiffel'],
      ['rivers', 'rivers.md', 'text/markdown', RIVERS, 'longest river'],
      ['coffee', 'coffee.html', 'text/html', COFFEE_HTML, 'Espresso is brewed'],
      ['bridges', 'bridges.docx', 'application/octet-stream', docxOf(['The Millau Viaduct is a cable-stayed bridge in southern France.', 'It is the tallest bridge in the world.']), 'Millau Viaduct'],
      ['prices', 'prices.csv', 'text/csv', 'item,price\ncroissant,1.20\nbaguette,1.10\n', 'croissant'],
      ['notes', 'notes.txt', 'text/plain', '\uFEFFPlain notes: the Louvre is the most visited museum.', 'Louvre'],
    ];
    for (const [key, name, type, content, phrase] of uploads) {
      const res = await upload(name, type, content);
      expect(res.status, `${name}: ${res.text}`).toBe(201);
      expect(res.body).toMatchObject({ name, status: 'ready', size: Buffer.byteLength(content as string) });
      docs[key] = res.body.id;
      const read = await t.request('GET', `/api/knowledge/documents/${res.body.id}`);
      expect(read.body.text).toContain(phrase);
    }
    expect((await t.request('GET', `/api/knowledge/documents/${docs.coffee}`)).body.text).not.toMatch(/steal|p\{\}/);
    expect((await t.request('GET', `/api/knowledge/documents/${docs.towers}`)).body.mime_type).toBe('application/pdf');
    const named = await upload('../../etc/x.txt', 'text/plain', 'hello', { name: 'Shown\u0000 name' });
    expect(named.body.name).toBe('Shown name');
    const listed = await t.request('GET', '/api/knowledge/documents?limit=2');
    expect(listed.body.items).toHaveLength(2);
    expect(listed.body.items[0]).not.toHaveProperty('text');
    expect(listed.body.next_cursor).toEqual(expect.any(String));
  });

  it('refuses empty, disguised, unreadable and oversized files with a 4xx naming the reason', async () => {
    expectProblem(await upload('empty.txt', 'text/plain', ''), 400, 'body.file');
    const disguisedImage = await upload('image.txt', 'text/plain', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]));
    expectProblem(disguisedImage, 415);
    expect(disguisedImage.body.detail).toMatch(/binary/);
    expectProblem(await upload('fake.pdf', 'application/pdf', 'just text pretending'), 415);
    expectProblem(await upload('broken.pdf', 'application/pdf', '%PDF-1.4\nnot really a pdf at all'), 422);
    expectProblem(await upload('fake.docx', 'application/octet-stream', 'plain text'), 415);
    expectProblem(await upload('other.docx', 'application/octet-stream', zipOf({ 'hello.txt': 'not a Word document' })), 422);
    expectProblem(await upload('latin1.txt', 'text/plain', Buffer.from([0x63, 0x61, 0x66, 0xe9])), 415);
    expectProblem(await upload('program.exe', 'application/x-msdownload', 'MZ'), 415);
    expectProblem(await upload('blank.md', 'text/markdown', '  \n\n  '), 422);
    expectProblem(await upload('huge.txt', 'text/plain', 'x'.repeat(300 * 1024)), 413);
    expectProblem(await t.request('POST', '/api/knowledge/documents', { body: { file: 'x' } }), 415);
    const truncated = formWith({ name: 'a.txt', type: 'text/plain', content: 'abc' });
    expectProblem(await t.request('POST', '/api/knowledge/documents', { body: truncated.body.slice(0, truncated.body.length - 20), headers: { 'content-type': truncated.contentType } }), 400);
  });

  it('indexes documents as a run, searches by keyword with no LLM at all, and drops a deleted document\u2019s passages', async () => {
    const created = await t.request('POST', '/api/knowledge-bases', { body: { project_id: projectId, name: 'Keyword only', chunking: { size: 200, overlap: 20 } } });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id;
    const added = await t.request('POST', `/api/knowledge-bases/${id}/documents`, { body: { document_ids: [docs.towers, docs.rivers, docs.coffee, docs.bridges] } });
    expect(added.status, added.text).toBe(202);
    expect(added.body.run).toMatchObject({ kind: 'knowledge_index', status: expect.any(String) });
    expect((await runDone(added.body.run.id)).body.status).toBe('succeeded');
    const base = await t.request('GET', `/api/knowledge-bases/${id}`);
    expect(base.body.documents.map((d: { status: string }) => d.status)).toEqual(['indexed', 'indexed', 'indexed', 'indexed']);
    expect(base.body.documents.find((d: { document_id: number }) => d.document_id === docs.towers).chunks).toBeGreaterThan(1);

    // Stemmed: "designing" finds "designed".
    const search = await t.request('POST', `/api/knowledge-bases/${id}/search`, { body: { query: 'Who was designing the tower?', top_k: 3 } });
    expect(search.status, search.text).toBe(200);
    expect(search.body.mode).toBe('keyword');
    expect(search.body.items[0]).toMatchObject({ document_id: docs.towers, document_name: 'towers.pdf', text: expect.stringContaining('Gustave Eiffel') });
    expect(search.body.items.map((h: { score: number }) => h.score)).toEqual([...search.body.items.map((h: { score: number }) => h.score)].sort((a, b) => b - a));

    // The engines' own query syntax is not the caller's to use: operators, quotes and comments are words or nothing.
    for (const hostile of ['"unclosed', 'tower NEAR/2 Paris', 'tower*', "x') OR 1=1 --", 'river -- drop', '/* */ AND OR NOT', ':', '\u0000']) {
      const res = await t.request('POST', `/api/knowledge-bases/${id}/search`, { body: { query: hostile } });
      expect(res.status, `${hostile}: ${res.text}`).toBeLessThan(500);
    }
    expectProblem(await t.request('POST', `/api/knowledge-bases/${id}/search`, { body: { query: 'tower', mode: 'vector' } }), 400, 'body.mode');
    expectProblem(await t.request('POST', `/api/knowledge-bases/${id}/search`, { body: { query: '' } }), 400, 'body.query');

    expect((await t.request('DELETE', `/api/knowledge/documents/${docs.coffee}`)).status).toBe(204);
    await until(() => t.request('GET', `/api/knowledge-bases/${id}`), (r) => r.body.documents.length === 3, 10_000);
    expect((await t.request('POST', `/api/knowledge-bases/${id}/search`, { body: { query: 'espresso coffee' } })).body.items).toEqual([]);
    expect((await t.request('DELETE', `/api/knowledge-bases/${id}/documents/${docs.rivers}`)).status).toBe(204);
    expect((await t.request('POST', `/api/knowledge-bases/${id}/search`, { body: { query: 'Loire river' } })).body.items).toEqual([]);
    expectProblem(await t.request('DELETE', `/api/knowledge-bases/${id}/documents/${docs.rivers}`), 404);
  });

  it('embeds passages through the mesh: vector and hybrid search; asks with cited sources, and says so when nothing is relevant', async () => {
    const created = await t.request('POST', '/api/knowledge-bases', { body: { project_id: projectId, name: 'Hybrid', embedding: { connection_id: connectionId, model: 'embed-test' }, chunking: { size: 300, overlap: 30 } } });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id;
    const added = await t.request('POST', `/api/knowledge-bases/${id}/documents`, { body: { document_ids: [docs.towers, docs.rivers, docs.bridges, docs.notes] } });
    expect((await runDone(added.body.run.id)).body.status).toBe('succeeded');
    expect(openai.requests.some((r) => r.path === '/v1/embeddings' && r.body.model === 'embed-test')).toBe(true);

    const vector = await t.request('POST', `/api/knowledge-bases/${id}/search`, { body: { query: 'Millau Viaduct bridge', mode: 'vector', top_k: 2 } });
    expect(vector.status, vector.text).toBe(200);
    expect(vector.body.items[0].document_id).toBe(docs.bridges);
    const hybrid = await t.request('POST', `/api/knowledge-bases/${id}/search`, { body: { query: 'How long is the Loire river?' } });
    expect(hybrid.body.mode).toBe('hybrid');
    expect(hybrid.body.items[0].document_id).toBe(docs.rivers);

    openai.script.push({ text: 'The Loire runs 1,006 kilometres [1].' });
    const asked = await t.request('POST', `/api/knowledge-bases/${id}/ask`, { body: { question: 'How long is the Loire river?', connection_id: connectionId, top_k: 3 } });
    expect(asked.status, asked.text).toBe(200);
    expect(asked.body).toMatchObject({ answer: 'The Loire runs 1,006 kilometres [1].', grounded: true });
    expect(asked.body.sources[0]).toMatchObject({ n: 1, document_id: docs.rivers, document_name: 'rivers.md', excerpt: expect.stringContaining('Loire') });
    const prompt = openai.requests.at(-1)!.body.messages;
    expect(prompt[0]).toMatchObject({ role: 'system', content: expect.stringContaining('[n]') });
    expect(prompt[1].content).toMatch(/^Sources:\n\n\[1\] \(rivers\.md\)\n.*Loire/s);
    expect(prompt[1].content).toMatch(/Question: How long is the Loire river\?$/);

    // Nothing about it in the base: no model asked, no invented answer.
    const keywordOnly = await t.request('POST', '/api/knowledge-bases', { body: { project_id: projectId, name: 'Plain' } });
    await runDone((await t.request('POST', `/api/knowledge-bases/${keywordOnly.body.id}/documents`, { body: { document_ids: [docs.towers] } })).body.run.id);
    const before = openai.requests.length;
    const unknown = await t.request('POST', `/api/knowledge-bases/${keywordOnly.body.id}/ask`, { body: { question: 'What do zebras eat?', connection_id: connectionId } });
    expect(unknown.body).toMatchObject({ grounded: false, sources: [], answer: expect.stringMatching(/could not find/) });
    expect(openai.requests.length).toBe(before);

    const askPlain = (body: Record<string, unknown>) => t.request('POST', `/api/knowledge-bases/${keywordOnly.body.id}/ask`, { body });
    expectProblem(await askPlain({ question: '   ', connection_id: connectionId }), 400, 'body.question');
    expectProblem(await askPlain({ question: 'x'.repeat(10_001), connection_id: connectionId }), 400, 'body.question');
    expectProblem(await askPlain({ question: 'Eiffel?', connection_id: 999_999 }), 400, 'body.connection_id');
    expectProblem(await askPlain({ question: 'Eiffel?', connection_id: connectionId, top_k: 21 }), 400, 'body.top_k');
    expectProblem(await askPlain({ question: 'Eiffel?', connection_id: connectionId, temperature: 2 }), 400, 'body.temperature');
    expectProblem(await t.request('POST', '/api/knowledge-bases/999999/ask', { body: { question: 'Eiffel?', connection_id: connectionId } }), 404);
  });

  it('cancels an indexing run midway: documents done stay indexed, the rest stay pending for the next run, the provider\u2019s call is ended', async () => {
    const created = await t.request('POST', '/api/knowledge-bases', { body: { project_id: projectId, name: 'Cancelled', embedding: { connection_id: connectionId, model: 'embed-test' } } });
    const id = created.body.id;
    openai.embeddingDelayMs = 1500;
    let runId = 0;
    try {
      const added = await t.request('POST', `/api/knowledge-bases/${id}/documents`, { body: { document_ids: [docs.towers, docs.rivers, docs.bridges, docs.notes] } });
      expect(added.status, added.text).toBe(202);
      runId = added.body.run.id;
      await until(() => t.request('GET', `/api/knowledge-bases/${id}`), (r) => r.body.documents.some((d: { status: string }) => d.status === 'indexed'), 20_000);
      // The run says how far it has come.
      const running = await until(() => t.request('GET', `/api/pipeline/runs/${added.body.run.id}`), (r) => r.body.progress?.done >= 1, 10_000);
      expect(running.body.progress).toEqual({ done: expect.any(Number), total: 4 });
      const cancelled = await t.request('POST', `/api/pipeline/runs/${added.body.run.id}/cancel`);
      expect(cancelled.status, cancelled.text).toBeLessThan(300);
      expect((await runDone(added.body.run.id)).body.status).toBe('cancelled');
    } finally {
      openai.embeddingDelayMs = 0;
    }
    const documents = (await t.request('GET', `/api/knowledge-bases/${id}`)).body.documents as { status: string; chunks: number }[];
    const indexed = documents.filter((d) => d.status === 'indexed');
    const pending = documents.filter((d) => d.status === 'pending');
    expect(indexed.length).toBeGreaterThanOrEqual(1);
    expect(pending.length).toBeGreaterThanOrEqual(1);
    expect(indexed.length + pending.length).toBe(4);
    // No half-written document: one pending has no passage, one indexed has them all.
    expect(pending.every((d) => d.chunks === 0)).toBe(true);
    expect(indexed.every((d) => d.chunks > 0)).toBe(true);
    // The embeddings call in flight when the run was cancelled was ended, not waited for.
    expect(openai.requests.filter((r) => r.path === '/v1/embeddings').some((r) => r.aborted)).toBe(true);

    // A document whose passages were being written when the cancel came may be done but not yet counted.
    const { progress } = (await t.request('GET', `/api/pipeline/runs/${runId}`)).body;
    expect(progress.total).toBe(4);
    expect(progress.done).toBeLessThanOrEqual(indexed.length);
    expect(progress.done).toBeGreaterThanOrEqual(indexed.length - 1);
    const resumed = await t.request('POST', `/api/knowledge-bases/${id}/documents`, { body: { document_ids: [docs.notes] } });
    const finished = await runDone(resumed.body.run.id);
    expect(finished.body.status).toBe('succeeded');
    expect(finished.body.progress).toEqual({ done: pending.length, total: pending.length });
    expect((await t.request('GET', `/api/knowledge-bases/${id}`)).body.documents.map((d: { status: string }) => d.status)).toEqual(['indexed', 'indexed', 'indexed', 'indexed']);
  });

  it('grounds a chat in knowledge bases: each message searched across them, the reply citing its sources', async () => {
    const keywordBase = async (name: string, documentId: number) => {
      const base = await t.request('POST', '/api/knowledge-bases', { body: { project_id: projectId, name } });
      await runDone((await t.request('POST', `/api/knowledge-bases/${base.body.id}/documents`, { body: { document_ids: [documentId] } })).body.run.id);
      return base.body.id as number;
    };
    const [towersBase, riversBase] = [await keywordBase('Towers', docs.towers), await keywordBase('Rivers', docs.rivers)];
    const created = await t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, knowledge_base_ids: [towersBase, riversBase] } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.knowledge_base_ids).toEqual([towersBase, riversBase]);
    const say = (content: string, stream = false) => t.request('POST', `/api/chat/conversations/${created.body.id}/messages`, { body: { content, stream } });

    openai.script.push({ text: 'The Loire runs 1,006 kilometres [1].' });
    const replied = await say('How long is the Loire river?');
    expect(replied.status, replied.text).toBe(200);
    expect(replied.body.sources[0]).toMatchObject({ n: 1, knowledge_base_id: riversBase, document_id: docs.rivers, document_name: 'rivers.md', excerpt: expect.stringContaining('Loire') });
    const told = openai.requests.at(-1)!.body.messages;
    expect(told.at(-1)).toEqual({ role: 'user', content: 'How long is the Loire river?' });
    expect(told.at(-2)).toMatchObject({ role: 'system', content: expect.stringMatching(/cite it .* as \[n\].*\[1\] \(rivers\.md\)\n.*Loire/s) });
    const kept = (await t.request('GET', `/api/chat/conversations/${created.body.id}`)).body.messages;
    expect(kept.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);
    expect(kept[1].sources).toEqual(replied.body.sources);

    // Both bases are searched: the tower question cites the other base.
    openai.script.push({ pieces: ['It is 330 metres', ' tall [1].'] });
    const streamed = await say('How tall is the Eiffel Tower?', true);
    const events = sseEvents(streamed.text);
    expect(events[0].event).toBe('sources');
    expect(events[0].data.sources[0]).toMatchObject({ n: 1, knowledge_base_id: towersBase, document_name: 'towers.pdf' });
    expect(events.at(-1)).toMatchObject({ event: 'done', data: { message: { content: 'It is 330 metres tall [1].' }, sources: events[0].data.sources } });

    // Nothing relevant: the model is told so, and the reply cites nothing.
    openai.script.push({ text: 'The documents do not cover zebras.' });
    const unknown = await say('What do zebras eat?');
    expect(unknown.body.sources).toEqual([]);
    expect(openai.requests.at(-1)!.body.messages.at(-2)).toMatchObject({ role: 'system', content: expect.stringMatching(/hold nothing/) });

    const outsider = await t.outsider(`chat-kb-outsider-${dialect}`);
    const theirProject = await t.request('POST', '/api/projects', { token: outsider.token, body: { key: 'THEIRS', name: 'Theirs' } });
    const theirBase = await t.request('POST', '/api/knowledge-bases', { token: outsider.token, body: { project_id: theirProject.body.id, name: 'Theirs' } });
    const start = (knowledge_base_ids: unknown) => t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, knowledge_base_ids } });
    expectProblem(await start([999_999]), 400, 'body.knowledge_base_ids.0');
    expectProblem(await start([towersBase, theirBase.body.id]), 400, 'body.knowledge_base_ids.1');
    expectProblem(await start([towersBase, towersBase]), 400, 'body.knowledge_base_ids');
    expectProblem(await start(["1' or '1'='1"]), 400, 'body.knowledge_base_ids.0');
    expectProblem(await start(Array.from({ length: 17 }, (_, i) => i + 1)), 400, 'body.knowledge_base_ids');

    // Where the grounding plugin is disabled, no conversation names bases, and one that did says why.
    expect((await t.request('PUT', '/api/plugins/chat_knowledge/organizations/1', { body: { enabled: false } })).status).toBe(200);
    try {
      expectProblem(await start([towersBase]), 400, 'body.knowledge_base_ids');
      expectProblem(await say('How long is the Loire river?'), 422);
    } finally {
      expect((await t.request('PUT', '/api/plugins/chat_knowledge/organizations/1', { body: { enabled: true } })).status).toBe(200);
    }
  });

  it('refuses bad knowledge bases, and offers knowledge_search to agents', async () => {
    expectProblem(await t.request('POST', '/api/knowledge-bases', { body: { project_id: 999_999, name: 'x' } }), 400, 'body.project_id');
    expectProblem(await t.request('POST', '/api/knowledge-bases', { body: { project_id: projectId, name: 'x', embedding: { connection_id: 999_999, model: 'm' } } }), 400, 'body.embedding.connection_id');
    expectProblem(await t.request('POST', '/api/knowledge-bases', { body: { project_id: projectId, name: 'x', chunking: { size: 100, overlap: 60 } } }), 400, 'body.chunking.overlap');
    const base = await t.request('POST', '/api/knowledge-bases', { body: { project_id: projectId, name: 'Tools' } });
    expectProblem(await t.request('POST', `/api/knowledge-bases/${base.body.id}/documents`, { body: { document_ids: [999_999] } }), 400, 'body.document_ids.0');
    await runDone((await t.request('POST', `/api/knowledge-bases/${base.body.id}/documents`, { body: { document_ids: [docs.towers] } })).body.run.id);
    const tool = await t.request('POST', '/api/agent-tools/knowledge_search/invoke', { body: { arguments: { knowledge_base_id: base.body.id, query: 'Chrysler Building' } } });
    expect(tool.status, tool.text).toBe(200);
    expect(tool.body.result.items[0].text).toContain('Chrysler');
    const outsider = await t.outsider(`kb-outsider-${dialect}`);
    expectProblem(await t.request('GET', `/api/knowledge-bases/${base.body.id}`, { token: outsider.token }), 404);
    expectProblem(await t.request('GET', `/api/knowledge/documents/${docs.towers}`, { token: outsider.token }), 404);
  });
});
