import { defineRoute, identitySchemas as s, z, type RouteDefinition } from '../../kernel/plugin-api.ts';
import type { PublishedAssets } from './assets.ts';

const assetSchema = z
  .object({
    asset_type: z.string().describe('`api_service`, or a type another plugin contributes to `publishing.assets`'),
    id: z.number().int(),
    name: z.string(),
    project_id: z.number().int(),
    status: z.string(),
    published_by: z.number().int().nullable().describe('The user who published it'),
    published_at: z.string(),
    url: z.string().describe('Where a client reaches it, e.g. /api/service/<key> for an API Service'),
  })
  .meta({ id: 'PublishedAsset' });

/** The `publishing` router's registry of published assets. */
export function assetRoutes(assets: PublishedAssets): RouteDefinition<any>[] {
  return [
    defineRoute({
      security: 'bearer',
      orgScoped: true,
      method: 'get',
      path: '/assets',
      summary: 'List published assets',
      description:
        "This organization's published assets, newest published first, a page at a time: API Services (published ones only) and the assets of the plugins contributing to `publishing.assets` that are enabled in the organization. `asset_type` keeps one type (another is a 400 naming the known ones), `project_id` one project; `limit` (1 to 500, default 50) per page, the next from `cursor` (the previous page's `next_cursor`, null after the last).",
      capability: 'publishing.read',
      request: {
        query: z.object({
          asset_type: z.string().max(200).optional().meta({ description: 'One asset type, e.g. `api_service`', example: 'api_service' }),
          project_id: s.pathId.optional(),
          limit: z.coerce.number().int().min(1).max(500).default(50),
          cursor: z.string().max(500).optional().meta({ description: 'The `next_cursor` of the previous page' }),
        }),
      },
      responses: { 200: { description: 'A page of published assets', schema: z.object({ items: z.array(assetSchema), next_cursor: z.string().nullable() }).meta({ id: 'PublishedAssetPage' }) } },
      handler: async ({ query, orgId, principal }) => assets.page(orgId, principal, query),
    }),
  ];
}
