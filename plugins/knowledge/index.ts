import crypto from 'node:crypto';
import bytes from 'bytes';
import { definePlugin, defineRoute, HttpProblem, identitySchemas as s, kernelServices, readFormFile, reply, z } from '../../kernel/plugin-api.ts';
import { DocumentStore } from './document-store.ts';
import { DOCUMENT_TYPES, extractDocument } from './extract.ts';
import { knowledgeMigrations } from './migrations.ts';
import { knowledgeDocuments } from './public.ts';

const documentSchema = z
  .object({ id: z.number().int(), name: z.string(), mime_type: z.string(), size: z.number().int(), sha256: z.string(), chars: z.number().int(), status: z.literal('ready'), created_by: z.number().int().nullable(), created_at: z.string() })
  .meta({ id: 'KnowledgeDocument' });

/** A file name as shown: its last path segment, without control characters, at most 200 characters. */
const displayedName = (filename: string) => (filename.split(/[\\/]/).pop() ?? '').replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 200) || 'document';

/** The `knowledge` router: documents uploaded to the organization, their text extracted once, for knowledge bases to index. */
export default definePlugin({
  deps: { storage: kernelServices.storage, events: kernelServices.events, config: kernelServices.config },
  migrations: knowledgeMigrations,
  init: ({ storage, events, config }, ctx) => {
    const store = new DocumentStore(storage, events);
    ctx.provideService(knowledgeDocuments, { get: (orgId, id) => store.find(orgId, id) });
    const limit = { text: config.KNOWLEDGE_UPLOAD_LIMIT, bytes: bytes.parse(config.KNOWLEDGE_UPLOAD_LIMIT) ?? 20 * 1024 ** 2 };
    const read = { security: 'bearer', orgScoped: true, capability: 'knowledge.read' } as const;
    const write = { security: 'bearer', orgScoped: true, capability: 'knowledge.write' } as const;
    const idParams = s.idParam('id');
    return {
      routes: [
        defineRoute({
          ...write,
          method: 'post',
          path: '/documents',
          summary: 'Upload a document',
          description: `A multipart form with the file as \`file\` (and optionally \`name\`): text, Markdown, HTML, CSV, PDF (read with PDF.js through unpdf) or DOCX (mammoth), known by its media type or extension (${Object.values(DOCUMENT_TYPES).flat().join(', ')}) and checked against its bytes. Its text is extracted at once. An empty file is a 400, a file that is not what it claims (or of another type) a 415, one that cannot be read or holds no text a 422, one over KNOWLEDGE_UPLOAD_LIMIT a 413.`,
          request: {
            stream: {
              contentTypes: ['multipart/form-data'],
              description: 'The document',
              schemas: { 'multipart/form-data': { schema: z.object({ file: z.string().meta({ format: 'binary' }), name: z.string().optional().describe('Shown instead of the file\u2019s name') }), encoding: { file: { contentType: 'application/octet-stream' } } } },
            },
          },
          responses: { 201: { description: 'The document, its text extracted', schema: documentSchema }, 413: { description: 'Larger than KNOWLEDGE_UPLOAD_LIMIT' }, 415: { description: 'Not a kind read, or not what it claims' }, 422: { description: 'Unreadable, or no text in it' } },
          handler: async ({ orgId, principal, audit, koa }) => {
            const form = await readFormFile(koa, { field: 'file', limitBytes: limit.bytes, tooLarge: () => new HttpProblem(413, `the file is larger than KNOWLEDGE_UPLOAD_LIMIT (${limit.text})`), what: 'a document upload (file)' });
            const { type, text } = await extractDocument(form.file, form.filename, form.mimeType);
            const name = displayedName(form.fields.name ?? form.filename);
            const document = await store.create(orgId, { name, mime_type: type, size: form.file.length, sha256: crypto.createHash('sha256').update(form.file).digest('hex'), text }, principal.userId);
            await audit.record({ action: 'knowledge.document.upload', targetType: 'knowledge_document', targetId: document.id, details: { mime_type: type, size: document.size } });
            return reply(201, document);
          },
        }),
        defineRoute({
          ...read,
          method: 'get',
          path: '/documents',
          summary: 'List documents',
          description: 'Newest first, without their text.',
          request: { query: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), cursor: z.string().max(200).optional() }) },
          responses: { 200: { description: 'A page of documents', schema: z.object({ items: z.array(documentSchema), next_cursor: z.string().nullable() }) } },
          handler: ({ query, orgId }) => store.list(orgId, query),
        }),
        defineRoute({
          ...read,
          method: 'get',
          path: '/documents/{id}',
          summary: 'Get a document with its text',
          description: 'The text as extracted at upload: what knowledge bases cut into passages.',
          request: { params: idParams },
          responses: { 200: { description: 'The document and its extracted text', schema: documentSchema.extend({ text: z.string() }) } },
          handler: ({ params, orgId }) => store.get(orgId, params.id),
        }),
        defineRoute({
          ...write,
          method: 'delete',
          path: '/documents/{id}',
          summary: 'Delete a document',
          description: 'Knowledge bases drop its passages.',
          request: { params: idParams },
          responses: { 204: { description: 'Deleted' } },
          handler: async ({ params, orgId, audit }) => {
            await store.remove(orgId, params.id);
            await audit.record({ action: 'knowledge.document.delete', targetType: 'knowledge_document', targetId: params.id });
            return reply(204);
          },
        }),
      ],
    };
  },
});
