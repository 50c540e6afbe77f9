import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formWith } from '../harness/documents.ts';
import { DIALECTS, REPO_ROOT, startTestKernel, type TestKernel } from '../harness/index.ts';
import { startOpenAiServer, type LlmServer } from '../harness/llm-servers.ts';
import { finished } from '../pipeline/pipeline-helpers.ts';

const CORPUS = path.join(REPO_ROOT, 'test/fixtures/knowledge');
/** Questions, and a phrase of the passage that answers each (whitespace as one space). */
const QUESTIONS: [string, string][] = [
  ['How many spaces should be used per indentation level?', 'Use 4 spaces per indentation level'],
  ['What is the maximum length of a line of code?', 'Limit all lines to a maximum of 79 characters'],
  ['Should I indent with tabs or with spaces?', 'Spaces are the preferred indentation method'],
  ['In which order should imports be grouped?', 'Standard library imports'],
  ['Are wildcard imports acceptable?', 'Wildcard imports'],
  ['How many blank lines go around top-level function definitions?', 'Surround top-level function and class definitions with two blank lines'],
  ['How are constants named?', 'capital letters with underscores separating words'],
  ['How should a value be compared to None?', 'Comparisons to singletons like None'],
  ['Should a line break before or after a binary operator?', "Knuth's style is suggested"],
  ['What source file encoding should the core distribution use?', 'should always use UTF-8'],
  ['Which quotes should docstrings be written with?', 'triple double quotes'],
  ['Where do the closing quotes of a one-line docstring go?', 'The closing quotes are on the same line as the opening quotes'],
  ['Is there a blank line after the docstring of a class?', 'Insert a blank line after all docstrings'],
  ['What do f-strings let you embed inside string literals?', 'embed expressions inside string literals'],
  ['Can the f prefix be combined with the raw r prefix?', "'f' may be combined with 'r'"],
  ['What is the syntax of an assignment expression?', 'NAME := expr'],
  ['Can an unparenthesized assignment expression be used at the top level of an expression statement?', 'Unparenthesized assignment expressions are prohibited at the top'],
  ['Is beautiful better than ugly?', 'Beautiful is better than ugly'],
  ['Should errors pass silently?', 'Errors should never pass silently'],
  ['How does a relative import refer to the current package?', 'A single leading dot indicates a relative import'],
];
const normalized = (text: string) => text.replace(/\s+/g, ' ');

/**
 * Issue 19, "Retrieval quality": recall@5 of keyword, vector and hybrid search over real public
 * documents, each question's answer a known passage. The vectors come from the loopback model
 * server's embeddings (a hashed bag of words, not a trained model): the vector and hybrid figures
 * measure the platform's plumbing and fusion, a real embedding model does better.
 */
describe.each(DIALECTS)('retrieval quality (%s)', (dialect) => {
  let t: TestKernel;
  let server: LlmServer;
  let kb: number;

  beforeAll(async () => {
    server = await startOpenAiServer();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', WORKER_POLL_MS: '50' } });
    const project = (await t.request('POST', '/api/projects', { body: { key: 'PEPS', name: 'PEPs' } })).body.id;
    const connection = (await t.request('POST', '/api/llm-mesh/connections', { body: { name: 'embeddings', provider: 'openai_compatible', config: { base_url: `${server.url}/v1`, default_model: 'embed-test' } } })).body.id;
    const ids: number[] = [];
    for (const file of fs.readdirSync(CORPUS).filter((f) => f.endsWith('.txt'))) {
      const form = formWith({ name: file, type: 'text/plain', content: fs.readFileSync(path.join(CORPUS, file)) });
      ids.push((await t.request('POST', '/api/knowledge/documents', { body: form.body, headers: { 'content-type': form.contentType } })).body.id);
    }
    kb = (await t.request('POST', '/api/knowledge-bases', { body: { project_id: project, name: 'PEPs', embedding: { connection_id: connection, model: 'embed-test' }, chunking: { size: 800, overlap: 100 } } })).body.id;
    const indexing = await t.request('POST', `/api/knowledge-bases/${kb}/documents`, { body: { document_ids: ids } });
    expect((await finished(t, indexing.body.run.id, 60_000)).status).toBe('succeeded');
  });
  afterAll(async () => {
    await t?.stop();
    await server?.close();
  });

  it('finds the answering passage in the top 5 for most questions, by each mode', async () => {
    const recall: Record<string, number> = {};
    const missed: Record<string, string[]> = {};
    for (const mode of ['keyword', 'vector', 'hybrid']) {
      let found = 0;
      missed[mode] = [];
      for (const [question, phrase] of QUESTIONS) {
        const res = await t.request('POST', `/api/knowledge-bases/${kb}/search`, { body: { query: question, top_k: 5, mode } });
        expect(res.status, res.text).toBe(200);
        if (res.body.items.some((hit: { text: string }) => normalized(hit.text).includes(phrase))) found++;
        else missed[mode].push(question);
      }
      recall[mode] = Math.round((found / QUESTIONS.length) * 100) / 100;
    }
    const report = { dialect, questions: QUESTIONS.length, recall_at_5: recall, missed };
    fs.mkdirSync(path.join(REPO_ROOT, 'test/artifacts'), { recursive: true });
    fs.writeFileSync(path.join(REPO_ROOT, `test/artifacts/retrieval-quality-${dialect}.json`), `${JSON.stringify(report, null, 2)}\n`);
    console.log(`retrieval quality (${dialect}): recall@5 ${JSON.stringify(recall)}`);
    expect(recall.keyword).toBeGreaterThanOrEqual(0.7);
    expect(recall.hybrid).toBeGreaterThanOrEqual(0.7);
    expect(recall.vector).toBeGreaterThanOrEqual(0.4);
  });
});
