import type { KnowledgeDocuments } from '../knowledge/public.ts';
import type { LlmMesh } from '../llm_mesh/public.ts';
import type { RunKindContribution } from '../pipeline/public.ts';
import { chunkText } from './chunking.ts';
import type { KnowledgeBaseStore } from './kb-store.ts';

export const INDEX_KIND = 'knowledge_index';
/** Passages embedded per call of the mesh. */
const EMBED_BATCH = 64;

/**
 * The run that indexes a knowledge base's pending documents: each is cut into passages, embedded
 * through the mesh when the base has embeddings (as the user who started the run: their quotas and
 * the connection's limits apply), and its passages replaced in one transaction. A run cancelled
 * stops between batches, leaving the documents not yet done pending for the next run. A document
 * that cannot be indexed is marked failed with why; the run goes on with the others and fails at the
 * end, naming them.
 */
export function indexingKind(store: KnowledgeBaseStore, documents: KnowledgeDocuments, mesh: LlmMesh): RunKindContribution<{ kb_id: number }> {
  return {
    kind: INDEX_KIND,
    description: 'Indexes the pending documents of a knowledge base: passages cut, embedded, made searchable',
    async execute({ orgId, payload, principal, signal, log, progress }) {
      const base = await store.get(orgId, payload.kb_id);
      const pending = await store.pending(base.id);
      log('info', `${pending.length} document(s) to index into knowledge base ${base.id} (passages of ${base.chunking.size} characters, ${base.chunking.overlap} overlapping)`);
      const failed: string[] = [];
      for (const [index, item] of pending.entries()) {
        signal.throwIfAborted();
        await progress(index, pending.length);
        const document = await documents.get(orgId, item.document_id);
        if (!document) {
          await store.failDocument(base.id, item.document_id, 'the document was deleted');
          failed.push(item.document_name);
          continue;
        }
        const chunks = chunkText(document.text, base.chunking.size, base.chunking.overlap);
        let vectors: (number[] | null)[] = chunks.map(() => null);
        try {
          if (base.embedding) {
            vectors = [];
            for (let i = 0; i < chunks.length; i += EMBED_BATCH) {
              signal.throwIfAborted();
              const batch = chunks.slice(i, i + EMBED_BATCH).map((c) => c.text);
              const answer = await mesh.embed({ orgId, principal, projectId: base.project_id }, { connection_id: base.embedding.connection_id, model: base.embedding.model, input: batch, signal });
              vectors.push(...answer.vectors);
            }
          }
        } catch (err) {
          if (signal.aborted) throw err;
          const reason = (err as { detail?: string }).detail ?? (err as Error).message;
          await store.failDocument(base.id, item.document_id, reason);
          log('warn', `document ${document.id} (${document.name}) could not be embedded: ${reason}`);
          failed.push(document.name);
          continue;
        }
        await store.replaceChunks(base.id, document.id, chunks.map((c, i) => ({ ...c, embedding: vectors[i] })));
        log('info', `${index + 1}/${pending.length}: document ${document.id} (${document.name}) indexed as ${chunks.length} passage(s)`);
      }
      await progress(pending.length, pending.length);
      if (failed.length) throw new Error(`${failed.length} document(s) could not be indexed: ${failed.join(', ')}`);
    },
  };
}
