import { definePlugin, defineRoute, identitySchemas as s, kernelServices, problems, reply, z, type FieldError, type Principal } from '../../kernel/plugin-api.ts';
import { KNOWLEDGE_DOCUMENT_DELETED, knowledgeDocuments, type KnowledgeDocumentDeletedEvent } from '../knowledge/public.ts';
import { llmMesh } from '../llm_mesh/public.ts';
import { pipelineRuns, runKinds } from '../pipeline/public.ts';
import { projectCatalog } from '../projects/public.ts';
import { ask } from './ask.ts';
import { passagesFor } from './grounding.ts';
import { INDEX_KIND, indexingKind } from './indexing.ts';
import { knowledgeSearch } from './public.ts';
import { KnowledgeBaseStore } from './kb-store.ts';
import { knowledgeBasesMigrations } from './migrations.ts';
import { Searcher } from './search.ts';

const chunking = z
  .object({
    size: z.number().int().min(100).max(20_000).default(1000).describe('Characters per passage, at most'),
    overlap: z.number().int().min(0).max(5000).default(150).describe('Characters a passage repeats of the one before'),
  })
  .strict()
  .refine((c) => c.overlap < c.size / 2, { message: 'overlap must be less than half the size', path: ['overlap'] });

const baseSchema = z
  .object({
    id: z.number().int(),
    project_id: z.number().int(),
    name: z.string(),
    embedding: z.object({ connection_id: z.number().int(), model: z.string() }).nullable(),
    chunking: z.object({ size: z.number().int(), overlap: z.number().int() }),
    created_by: z.number().int().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'KnowledgeBase' });
const documentSchema = z.object({ document_id: z.number().int(), document_name: z.string(), status: z.enum(['pending', 'indexed', 'failed']), error: z.string().nullable(), chunks: z.number().int(), added_at: z.string() });
const hitSchema = z.object({ chunk_id: z.number().int(), document_id: z.number().int(), document_name: z.string(), text: z.string(), score: z.number(), position: z.number().int() }).meta({ id: 'KnowledgeSearchHit' });

/**
 * The `knowledge_bases` router: documents cut into passages, indexed by a run (keyword through the
 * database's full-text engine; vectors through the LLM mesh), searched by keyword, vector or both,
 * and asked questions answered with cited sources.
 */
export default definePlugin({
  deps: { storage: kernelServices.storage, events: kernelServices.events },
  migrations: knowledgeBasesMigrations,
  init: ({ storage, events }, ctx) => {
    const store = new KnowledgeBaseStore(storage);
    const mesh = ctx.useService(llmMesh);
    const documents = ctx.useService(knowledgeDocuments);
    const runs = ctx.useService(pipelineRuns);
    const projects = ctx.useService(projectCatalog);
    const searcher = new Searcher(store, mesh);
    ctx.contribute(runKinds, indexingKind(store, documents, mesh));
    ctx.provideService(knowledgeSearch, {
      async search(orgId, principal, kbId, query, topK) {
        const base = await store.get(orgId, kbId);
        return (await searcher.search({ orgId, principal, projectId: base.project_id }, base, query, topK, base.embedding ? 'hybrid' : 'keyword')).items;
      },
      async existing(orgId, kbIds) {
        return new Set((await store.list(orgId)).map((base) => base.id).filter((id) => kbIds.includes(id)));
      },
      passages: (caller, kbIds, query, topK) => passagesFor(store, searcher, caller, kbIds, query, topK),
    });
    events.subscribe('forget-deleted-documents', {
      types: [KNOWLEDGE_DOCUMENT_DELETED],
      handle: async (event) => {
        if (event.org_id !== null) await store.forgetDocument(event.org_id, (event.payload as KnowledgeDocumentDeletedEvent).document_id);
      },
    });
    const read = { security: 'bearer', orgScoped: true, capability: 'knowledge.read' } as const;
    const write = { security: 'bearer', orgScoped: true, capability: 'knowledge.write' } as const;
    const idParams = s.idParam('id');
    const callerOf = (input: { orgId: number; principal: Principal; requestId: string }, projectId: number) => ({ orgId: input.orgId, principal: input.principal, projectId, requestId: input.requestId });

    return {
      routes: [
        defineRoute({
          ...write,
          method: 'post',
          path: '',
          summary: 'Create a knowledge base',
          description: 'In a project. With `embedding` ({connection_id, model} of an LLM connection) its passages get vectors (vector and hybrid search); without, keyword search only, no LLM needed.',
          request: {
            body: z
              .object({
                project_id: s.recordId,
                name: s.displayName,
                embedding: z.object({ connection_id: s.recordId, model: z.string().min(1).max(200) }).strict().nullable().default(null),
                chunking: chunking.default({ size: 1000, overlap: 150 }),
              })
              .strict(),
          },
          responses: { 201: { description: 'The knowledge base', schema: baseSchema } },
          handler: async ({ body, orgId, principal, audit }) => {
            const errors: FieldError[] = [];
            if (!(await projects.exists(orgId, body.project_id))) errors.push({ path: 'body.project_id', message: 'no such project in this organization' });
            if (body.embedding && !(await mesh.connection(orgId, body.embedding.connection_id))) errors.push({ path: 'body.embedding.connection_id', message: 'no such LLM connection in this organization' });
            if (errors.length) throw problems.invalidFields(errors);
            const base = await store.create(orgId, body, principal.userId);
            await audit.record({ action: 'knowledge_bases.create', targetType: 'knowledge_base', targetId: base.id });
            return reply(201, base);
          },
        }),
        defineRoute({
          ...read,
          method: 'get',
          path: '',
          summary: 'List knowledge bases',
          description: 'The organization\u2019s knowledge bases, by id (GET /{id} adds their documents).',
          responses: { 200: { description: 'The knowledge bases', schema: z.object({ items: z.array(baseSchema) }) } },
          handler: async ({ orgId }) => ({ items: await store.list(orgId) }),
        }),
        defineRoute({
          ...read,
          method: 'get',
          path: '/{id}',
          summary: 'Get a knowledge base with its documents',
          description: 'Each document\u2019s status: pending until a run indexed it, indexed (with its passages), or failed with why.',
          request: { params: idParams },
          responses: { 200: { description: 'The knowledge base', schema: baseSchema.extend({ documents: z.array(documentSchema) }) } },
          handler: async ({ params, orgId }) => {
            const base = await store.get(orgId, params.id);
            return { ...base, documents: await store.documents(base.id) };
          },
        }),
        defineRoute({
          ...write,
          method: 'delete',
          path: '/{id}',
          summary: 'Delete a knowledge base',
          description: 'With its passages; the documents stay.',
          request: { params: idParams },
          responses: { 204: { description: 'Deleted' } },
          handler: async ({ params, orgId, audit }) => {
            await store.remove(orgId, params.id);
            await audit.record({ action: 'knowledge_bases.delete', targetType: 'knowledge_base', targetId: params.id });
            return reply(204);
          },
        }),
        defineRoute({
          ...write,
          method: 'post',
          path: '/{id}/documents',
          summary: 'Add documents and index them',
          description: `Adds the organization\u2019s documents (or marks those already in to be indexed again) and starts an indexing run (kind \`${INDEX_KIND}\`, seen and cancelled as any run: GET /api/pipeline/runs/{id}). 202 with the run.`,
          request: { params: idParams, body: z.object({ document_ids: z.array(s.recordId).min(1).max(500) }).strict() },
          responses: { 202: { description: 'Indexing started', schema: z.object({ knowledge_base: baseSchema, run: z.record(z.string(), z.unknown()) }) } },
          handler: async ({ params, body, orgId, principal, audit }) => {
            const base = await store.get(orgId, params.id);
            const found = await Promise.all(body.document_ids.map((id) => documents.get(orgId, id)));
            const errors = found.flatMap((d, i) => (d ? [] : [{ path: `body.document_ids.${i}`, message: 'no such document in this organization' }]));
            if (errors.length) throw problems.invalidFields(errors);
            await store.addDocuments(base.id, found.map((d) => ({ id: d!.id, name: d!.name })));
            const run = await runs.start(orgId, { kind: INDEX_KIND, project_id: base.project_id, trigger: 'manual', payload: { kb_id: base.id } }, principal);
            await audit.record({ action: 'knowledge_bases.documents.add', targetType: 'knowledge_base', targetId: base.id, details: { document_ids: body.document_ids, run_id: run.id } });
            return reply(202, { knowledge_base: await store.get(orgId, base.id), run });
          },
        }),
        defineRoute({
          ...write,
          method: 'delete',
          path: '/{id}/documents/{document_id}',
          summary: 'Take a document out of a knowledge base',
          description: 'With its passages; the document itself stays.',
          request: { params: idParams.extend(s.idParam('document_id').shape) },
          responses: { 204: { description: 'Removed' } },
          handler: async ({ params, orgId }) => {
            const base = await store.get(orgId, params.id);
            if (!(await store.removeDocument(base.id, params.document_id))) throw problems.notFound(`document ${params.document_id} is not in knowledge base ${base.id}`);
            return reply(204);
          },
        }),
        defineRoute({
          ...read,
          method: 'post',
          path: '/{id}/search',
          summary: 'Search a knowledge base',
          description:
            'keyword: the database\u2019s full-text engine (SQLite FTS5 with BM25, Postgres text search with ts_rank_cd), any of the query\u2019s words, stemmed; works with no LLM connection. vector: the query embedded through the mesh, passages by cosine similarity. hybrid: both rankings fused by reciprocal rank (k = 60). Default: hybrid when the base has embeddings, else keyword.',
          request: {
            params: idParams,
            body: z.object({ query: z.string().trim().min(1).max(10_000), top_k: z.number().int().min(1).max(50).default(5), mode: z.enum(['keyword', 'vector', 'hybrid']).optional() }).strict(),
          },
          responses: { 200: { description: 'The best passages, best first', schema: z.object({ mode: z.string(), items: z.array(hitSchema) }) } },
          handler: async ({ params, body, orgId, principal, requestId }) => {
            const base = await store.get(orgId, params.id);
            const mode = body.mode ?? (base.embedding ? 'hybrid' : 'keyword');
            const { items } = await searcher.search(callerOf({ orgId, principal, requestId }, base.project_id), base, body.query, body.top_k, mode);
            return { mode, items };
          },
        }),
        defineRoute({
          ...read,
          method: 'post',
          path: '/{id}/ask',
          summary: 'Ask a knowledge base',
          description:
            'The best passages (hybrid search with embeddings, else keyword) are given to the model, numbered, with the question; the answer cites them as [n], each pointing into `sources`. When nothing relevant is found, it says so and no model is asked. The call goes through the LLM mesh (guardrails, quotas, limits, traces).',
          request: {
            params: idParams,
            body: z.object({ question: z.string().trim().min(1).max(10_000), connection_id: s.recordId, model: z.string().min(1).max(200).optional(), top_k: z.number().int().min(1).max(20).default(5) }).strict(),
          },
          responses: {
            200: {
              description: 'The answer and its sources',
              schema: z.object({ answer: z.string(), sources: z.array(z.object({ n: z.number().int(), document_id: z.number().int(), document_name: z.string(), chunk_id: z.number().int(), excerpt: z.string() })), grounded: z.boolean(), cost_usd: z.number() }),
            },
          },
          handler: async ({ params, body, orgId, principal, requestId }) => {
            const base = await store.get(orgId, params.id);
            if (!(await mesh.connection(orgId, body.connection_id))) throw problems.badRequest('no such LLM connection in this organization', [{ path: 'body.connection_id', message: 'not found' }]);
            return ask(mesh, searcher, callerOf({ orgId, principal, requestId }, base.project_id), base, { text: body.question, connection_id: body.connection_id, model: body.model, top_k: body.top_k });
          },
        }),
      ],
    };
  },
});
