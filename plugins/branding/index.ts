import getRawBody from 'raw-body';
import type { Context } from 'koa';
import { definePlugin, defineRoute, HttpProblem, kernelServices, problems, reply, z } from '../../kernel/plugin-api.ts';
import { BrandingStore, DEFAULT_COLORS } from './branding-store.ts';
import { brandingMigrations } from './migrations.ts';
import { acceptLogo, LOGO_LIMIT_BYTES, LOGO_TYPES } from './logo.ts';
import { organizationBranding } from './public.ts';

/** A CSS hex colour: what pages and e-mails put in their style sheets as it is, so nothing else is accepted. */
const color = z
  .string()
  .regex(/^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/, 'must be a hex colour such as #1f4e79 or #fff')
  .transform((value) => value.toLowerCase());

const settingsInput = z
  .object({
    display_name: z.string().trim().min(1).max(100).nullable().optional().describe('Shown in published pages and e-mails instead of the organization\u2019s name; null: the organization\u2019s name'),
    primary_color: color.nullable().optional().describe(`null: the platform\u2019s (${DEFAULT_COLORS.primary_color})`),
    accent_color: color.nullable().optional().describe(`null: the platform\u2019s (${DEFAULT_COLORS.accent_color})`),
    email_footer: z.string().max(2000).nullable().optional().describe('Plain text at the end of the platform\u2019s e-mails (never read as HTML)'),
  })
  .strict();

const logoSchema = z
  .object({
    content_type: z.enum(LOGO_TYPES),
    bytes: z.number().int(),
    sha256: z.string(),
    updated_at: z.string(),
  })
  .nullable();

const brandingSchema = z
  .object({
    display_name: z.string().nullable(),
    primary_color: z.string(),
    accent_color: z.string(),
    email_footer: z.string().nullable(),
    logo: logoSchema.describe('null: no logo; the image itself is GET /api/branding/logo'),
    updated_at: z.string().nullable().describe('null: never changed (all defaults)'),
  })
  .meta({ id: 'Branding' });

const LOGO_LIMIT_TEXT = `${LOGO_LIMIT_BYTES / 1024} KB`;
/** What a logo may be sent as: one of its types, or no type of its own (its content says). */
const LOGO_UPLOAD_TYPES = [...LOGO_TYPES, 'application/octet-stream'];
const binary = () => z.string().meta({ format: 'binary' });

/** The request body whole, at most LOGO_LIMIT_BYTES: a larger one is a 413 before it is all read, a truncated one a 400. */
async function logoBody(ctx: Context): Promise<Buffer> {
  try {
    return await getRawBody(ctx.req, { length: ctx.request.length, limit: LOGO_LIMIT_BYTES });
  } catch (err) {
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.large') throw new HttpProblem(413, `the logo is larger than ${LOGO_LIMIT_TEXT}`, { errors: [{ path: 'body', message: `larger than ${LOGO_LIMIT_TEXT}` }] });
    if (type === 'request.size.invalid' || type === 'request.aborted') throw problems.badRequest('the logo ended before the length its request announced', [{ path: 'body', message: 'truncated' }]);
    throw err;
  }
}

/** The `branding` router: each organization's display name, colours, e-mail footer and logo. */
export default definePlugin({
  deps: { storage: kernelServices.storage, organizations: kernelServices.organizations },
  migrations: brandingMigrations,
  init: ({ storage, organizations }, ctx) => {
    const store = new BrandingStore(storage);
    ctx.provideService(organizationBranding, {
      get: async (orgId) => {
        const [branding, organization] = await Promise.all([store.get(orgId), organizations.get(orgId)]);
        return { ...branding, shown_name: branding.display_name ?? organization?.name ?? '' };
      },
      logo: (orgId) => store.logo(orgId),
    });
    const base = { security: 'bearer', orgScoped: true } as const;
    return {
      routes: [
        defineRoute({
          ...base,
          method: 'get',
          path: '',
          summary: 'The organization\u2019s branding',
          description: 'Any member of the organization may read it. Settings never changed answer the defaults.',
          responses: { 200: { description: 'The branding', schema: brandingSchema } },
          handler: ({ orgId }) => store.get(orgId),
        }),
        defineRoute({
          ...base,
          method: 'put',
          path: '',
          summary: 'Replace the organization\u2019s branding',
          description: 'Every setting as it should be from now on: one left out or null goes back to its default. The logo is set apart (PUT /api/branding/logo).',
          capability: 'branding.write',
          request: { body: settingsInput },
          responses: { 200: { description: 'The branding', schema: brandingSchema } },
          handler: async ({ body, orgId, principal, audit }) => {
            const settings = { display_name: body.display_name ?? null, primary_color: body.primary_color ?? null, accent_color: body.accent_color ?? null, email_footer: body.email_footer ?? null };
            const branding = await store.put(orgId, settings, principal.userId);
            await audit.record({ action: 'branding.update', targetType: 'organization', targetId: orgId, details: { changed: Object.keys(body) } });
            return branding;
          },
        }),
        defineRoute({
          ...base,
          method: 'put',
          path: '/logo',
          summary: 'Set the organization\u2019s logo',
          description: `The image itself as the body: PNG, JPEG or SVG, at most ${LOGO_LIMIT_TEXT}. Its type is found from its content, not from its name or Content-Type; a declared type the content contradicts is refused (415). An SVG must be well-formed, without DOCTYPE; it is sanitized (DOMPurify\u2019s SVG profile): scripts, event handlers, foreign objects, style sheets and references outside the image are removed.`,
          capability: 'branding.write',
          request: {
            stream: {
              contentTypes: LOGO_UPLOAD_TYPES,
              description: 'The image',
              schemas: Object.fromEntries(LOGO_UPLOAD_TYPES.map((type) => [type, { schema: binary() }])),
            },
          },
          responses: {
            200: { description: 'The branding, with the logo described', schema: brandingSchema.extend({ sanitized: z.boolean().describe('An SVG that sanitizing changed') }) },
            400: { description: 'An empty or truncated body, or an SVG that is not well-formed or has a DOCTYPE' },
            413: { description: `Larger than ${LOGO_LIMIT_TEXT}` },
            415: { description: 'Not a PNG, JPEG or SVG, or content other than its declared type' },
          },
          handler: async ({ orgId, principal, audit, koa }) => {
            const logo = acceptLogo(await logoBody(koa), koa.request.type || undefined);
            const branding = await store.putLogo(orgId, logo, principal.userId);
            await audit.record({ action: 'branding.logo.update', targetType: 'organization', targetId: orgId, details: { content_type: logo.type, bytes: logo.data.length, sanitized: logo.sanitized } });
            return { ...branding, sanitized: logo.sanitized };
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/logo',
          summary: 'The organization\u2019s logo',
          description: 'The image as it was accepted (an SVG as sanitized), with its type.',
          responses: {
            200: { description: 'The image', content: Object.fromEntries(LOGO_TYPES.map((type) => [type, binary()])) },
            404: { description: 'The organization has no logo' },
          },
          handler: async ({ orgId }) => {
            const logo = await store.logo(orgId);
            if (!logo) throw problems.notFound('this organization has no logo');
            return reply(200, logo.data, { 'Content-Type': logo.type, ETag: `"${logo.sha256}"` });
          },
        }),
        defineRoute({
          ...base,
          method: 'delete',
          path: '/logo',
          summary: 'Remove the organization\u2019s logo',
          description: 'Published pages and e-mails show the display name alone from then on.',
          capability: 'branding.write',
          responses: { 204: { description: 'Removed' }, 404: { description: 'The organization has no logo' } },
          handler: async ({ orgId, principal, audit }) => {
            if (!(await store.deleteLogo(orgId, principal.userId))) throw problems.notFound('this organization has no logo');
            await audit.record({ action: 'branding.logo.delete', targetType: 'organization', targetId: orgId });
            return reply(204);
          },
        }),
      ],
    };
  },
});
