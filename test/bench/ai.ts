/**
 * AI (issue 19), run by test/bench/run.ts on each adapter against a kernel process it started:
 * 1. the LLM mesh's overhead per call: one completion at a time through POST /api/llm-mesh/completions
 *    against the same call straight to the model server (an OpenAI-compatible server on loopback
 *    answering at once), without guardrails and with PII guardrails on the prompt and the answer;
 * 2. keyword search latency over a knowledge base of 100,000 passages (one at a time, a different
 *    query each call), the passages written straight into its table as an indexing run leaves them.
 */
import autocannon from 'autocannon';
import type { DialectName } from '../harness/dialects.ts';
import { startOpenAiServer } from '../harness/llm-servers.ts';
import { api, execute, type BenchKernel } from './bench-dataset.ts';

const DURATION_S = Number(process.env.BENCH_AI_DURATION_S ?? 5);
const PASSAGES = Number(process.env.BENCH_AI_PASSAGES ?? 100_000);
const WORDS_PER_PASSAGE = 60;
const VOCABULARY = 5_000;
/** Passages per INSERT statement while filling. */
const FILL_BATCH = 2_000;

/** A word of the synthetic vocabulary: letters only, so each is one token to both engines. */
const word = (i: number) => `w${i.toString(36).replace(/\d/g, (d) => 'abcdefghij'[Number(d)])}x`;
/** Zipf-like: a few words common, most rare, as in text. */
const randomWord = () => word(Math.floor(VOCABULARY * Math.random() ** 3));

interface Latency {
  calls_per_s: number;
  mean_ms: number;
  p50_ms: number;
  p99_ms: number;
}

/** One request at a time for DURATION_S: the latency of a call, not the throughput of many. */
async function sequential(url: string, headers: Record<string, string>, body: () => string): Promise<Latency> {
  const result = await autocannon({
    url,
    method: 'POST',
    connections: 1,
    duration: DURATION_S,
    headers: { 'content-type': 'application/json', ...headers },
    requests: [{ method: 'POST', setupRequest: (req: Record<string, unknown>) => ({ ...req, body: body() }) }] as never,
  });
  if (result.non2xx || result.errors) throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  // One call at a time: a call's mean time is the run's time over its calls, to the microsecond
  // (autocannon's latency histogram counts whole milliseconds, so a call under 1 ms would read as 0).
  const meanMs = (1000 * result.duration) / result.requests.total;
  return { calls_per_s: Math.round(result.requests.average), mean_ms: Math.round(meanMs * 1000) / 1000, p50_ms: result.latency.p50, p99_ms: result.latency.p99 };
}

export async function benchAi(dialect: DialectName, kernel: BenchKernel, token: string) {
  const { base } = kernel;
  const call = (method: string, route: string, body?: unknown) => api(base, method, route, token, body);
  const auth = { authorization: `Bearer ${token}` };
  const provider = await startOpenAiServer();
  try {
    const config = { base_url: `${provider.url}/v1`, default_model: 'gpt-test', prices: { 'gpt-test': { input_per_million: 1, output_per_million: 2 } } };
    const plain = await call('POST', '/api/llm-mesh/connections', { name: 'bench', provider: 'openai_compatible', config });
    const guarded = await call('POST', '/api/llm-mesh/connections', { name: 'bench-guarded', provider: 'openai_compatible', config, guardrails: { pii: { action: 'redact', stages: ['prompt', 'answer'] }, prompt_injection: { action: 'flag' } } });
    const prompt = () => `Summarize order ${Math.floor(Math.random() * 1e6)} for jane.doe@example.com`;
    const warm = (connection: number) => sequential(`${base}/api/llm-mesh/completions`, auth, () => JSON.stringify({ connection_id: connection, messages: [{ role: 'user', content: prompt() }] }));
    await warm(plain.id);
    const direct = await sequential(`${provider.url}/v1/chat/completions`, {}, () => JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: prompt() }] }));
    const mesh = await warm(plain.id);
    const meshGuarded = await warm(guarded.id);

    const project = await call('POST', '/api/projects', { key: 'AIBENCH', name: 'AI bench' });
    const kb = await call('POST', '/api/knowledge-bases', { project_id: project.id, name: 'passages' });
    const fillStarted = performance.now();
    await fillPassages(dialect, kernel.databaseUrl, kb.id);
    const fillSeconds = Math.round((performance.now() - fillStarted) / 100) / 10;
    const query = () => JSON.stringify({ query: `${randomWord()} ${randomWord()} ${randomWord()}`, top_k: 5, mode: 'keyword' });
    await sequential(`${base}/api/knowledge-bases/${kb.id}/search`, auth, query);
    const search = await sequential(`${base}/api/knowledge-bases/${kb.id}/search`, auth, query);
    return {
      dialect,
      completion_direct: direct,
      completion_through_mesh: mesh,
      completion_through_mesh_with_guardrails: meshGuarded,
      mesh_overhead_ms: Math.round((mesh.mean_ms - direct.mean_ms) * 100) / 100,
      mesh_overhead_with_guardrails_ms: Math.round((meshGuarded.mean_ms - direct.mean_ms) * 100) / 100,
      keyword_search: { passages: PASSAGES, fill_seconds: fillSeconds, ...search },
    };
  } finally {
    await provider.close();
  }
}

/** PASSAGES passages of WORDS_PER_PASSAGE words in one document of the base, written as an indexing run writes them (the full-text index kept by the database). */
async function fillPassages(dialect: DialectName, databaseUrl: string, kbId: number): Promise<void> {
  const now = new Date().toISOString();
  const statements = [`insert into knowledge_bases_documents (kb_id, document_id, document_name, status, error, chunks, added_at) values (${kbId}, 1, 'synthetic', 'indexed', null, ${PASSAGES}, '${now}')`];
  for (let from = 0; from < PASSAGES; from += FILL_BATCH) {
    const rows = Array.from({ length: Math.min(FILL_BATCH, PASSAGES - from) }, (_, i) => `(${kbId}, 1, ${(from + i) * 500}, '${Array.from({ length: WORDS_PER_PASSAGE }, randomWord).join(' ')}')`);
    statements.push(`insert into knowledge_bases_chunks (kb_id, document_id, position, text) values ${rows.join(', ')}`);
  }
  if (dialect === 'postgres') statements.push('analyze knowledge_bases_chunks');
  await execute(dialect, databaseUrl, statements);
}

export type AiFigures = Awaited<ReturnType<typeof benchAi>>;

/** The rows of the summary table for one adapter's figures. */
export function aiRows(f: AiFigures): Record<string, { value: string }> {
  const line = (l: Latency) => `${l.calls_per_s} calls/s, mean ${l.mean_ms} ms, p50 ${l.p50_ms} ms, p99 ${l.p99_ms} ms`;
  const d = f.dialect;
  return {
    [`${d}: completion straight to the model server (one at a time)`]: { value: line(f.completion_direct) },
    [`${d}: the same through the LLM mesh`]: { value: `${line(f.completion_through_mesh)}; overhead ${f.mesh_overhead_ms} ms a call` },
    [`${d}: through the mesh with PII and injection guardrails`]: { value: `${line(f.completion_through_mesh_with_guardrails)}; overhead ${f.mesh_overhead_with_guardrails_ms} ms a call` },
    [`${d}: keyword search over ${f.keyword_search.passages} passages (one at a time)`]: { value: `${line(f.keyword_search)} (filled in ${f.keyword_search.fill_seconds} s)` },
  };
}
