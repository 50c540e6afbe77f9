import { z } from 'zod';
import { definePlugin, defineRoute, identitySchemas as s, kernelServices, problems, reply } from '../../kernel/plugin-api.ts';
import { projectMigrations } from './migrations.ts';
import { ProjectStore } from './project-store.ts';
import { projectCatalog, projectDeleteGuards, type ProjectDeleteGuard } from './public.ts';

const projectSchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    key: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    created_by: z.number().int().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Project' });

/** Project keys as Dataiku has them: upper-case letters, digits and underscores, starting with a letter. */
const projectKey = z
  .string()
  .regex(/^[A-Z][A-Z0-9_]{1,31}$/, 'must be 2-32 upper-case letters, digits or underscores, starting with a letter');

/** The `projects` router: the containers datasets, imports and flows belong to. */
export default definePlugin({
  deps: { storage: kernelServices.storage },
  migrations: projectMigrations,
  init: ({ storage }, ctx) => {
    const projects = new ProjectStore(storage);
    const deleteGuards = new Set<ProjectDeleteGuard>();
    ctx.provideExtensionPoint(projectDeleteGuards, ({ value }) => {
      deleteGuards.add(value);
      return () => void deleteGuards.delete(value);
    });
    ctx.provideService(projectCatalog, {
      exists: async (orgId, projectId) => (await projects.find(orgId, projectId)) !== undefined,
    });
    const base = { security: 'bearer', orgScoped: true } as const;
    const idParams = s.idParam('id');
    return {
      routes: [
        defineRoute({
          ...base,
          method: 'post',
          path: '',
          summary: 'Create a project in the current organization',
          description:
            'A project groups datasets, imports and flows. Its `key` (short, upper-case) is unique in the organization (409) and never changes.',
          capability: 'projects.write',
          request: { body: z.object({ key: projectKey, name: z.string().trim().min(1).max(200), description: z.string().max(5000).nullable().optional() }) },
          responses: { 201: { description: 'The project', schema: projectSchema }, 409: { description: 'A project with this key already exists in the organization' } },
          handler: async ({ body, orgId, principal, audit }) => {
            const project = await projects.create(orgId, body, principal.userId);
            await audit.record({ action: 'project.create', targetType: 'project', targetId: project.id, details: { key: project.key } });
            return reply(201, project);
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '',
          summary: 'Projects of the current organization, paged, with search on key and name',
          description:
            'Projects of the current organization, paged with `limit` and `offset`; `q` searches key and name.',
          capability: 'projects.read',
          request: {
            query: z.object({
              limit: z.coerce.number().int().min(1).max(500).default(50),
              offset: z.coerce.number().int().min(0).default(0),
              search: z.string().trim().min(1).max(200).optional(),
            }),
          },
          responses: {
            200: { description: 'A page of projects', schema: z.object({ items: z.array(projectSchema), total: z.number().int(), limit: z.number().int(), offset: z.number().int() }) },
          },
          handler: async ({ query, orgId }) => ({ ...(await projects.list(orgId, query)), limit: query.limit, offset: query.offset }),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/{id}',
          summary: 'One project',
          description:
            'A project of the current organization. A project of another organization is a 404.',
          capability: 'projects.read',
          request: { params: idParams },
          responses: { 200: { description: 'The project', schema: projectSchema } },
          handler: ({ params, orgId }) => projects.get(orgId, params.id),
        }),
        defineRoute({
          ...base,
          method: 'patch',
          path: '/{id}',
          summary: 'Rename a project or change its description (the key never changes)',
          description:
            'Changes the name or description; the key is fixed at creation.',
          capability: 'projects.write',
          request: {
            params: idParams,
            body: z
              .object({ name: z.string().trim().min(1).max(200).optional(), description: z.string().max(5000).nullable().optional() })
              .refine((b) => Object.keys(b).length > 0, 'give at least one field to change'),
          },
          responses: { 200: { description: 'The project', schema: projectSchema } },
          handler: async ({ params, body, orgId, audit }) => {
            const project = await projects.update(orgId, params.id, body);
            await audit.record({ action: 'project.update', targetType: 'project', targetId: project.id, details: { changes: Object.keys(body) } });
            return project;
          },
        }),
        defineRoute({
          ...base,
          method: 'delete',
          path: '/{id}',
          summary: 'Delete a project',
          description:
            'Only an empty project can be deleted: one that still holds datasets or other content is a 409 saying what is left.',
          capability: 'projects.write',
          request: { params: idParams },
          responses: { 204: { description: 'Deleted' }, 409: { description: 'The project cannot be deleted while something depends on it (the detail says what, e.g. its datasets)' } },
          handler: async ({ params, orgId, audit }) => {
            await projects.get(orgId, params.id);
            for (const guard of deleteGuards) {
              const reason = await guard(orgId, params.id);
              if (reason) throw problems.conflict(`project ${params.id} cannot be deleted: ${reason}`);
            }
            const project = await projects.remove(orgId, params.id);
            await audit.record({ action: 'project.delete', targetType: 'project', targetId: project.id, details: { key: project.key } });
            return reply(204);
          },
        }),
      ],
    };
  },
});
