import { defineRoute, HttpProblem, identitySchemas as s, kernelServices, problems, reply, storedActorOf, z, type Delegation, type DomainEvents, type PluginEnablementService, type ServiceType, type UserPrincipal } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { OrganizationBranding } from '../branding/public.ts';
import type { CardService } from './card-data.ts';
import type { DashboardStore } from './dashboard-store.ts';
import type { LinkStore } from './link-store.ts';
import { PAGE_CSP, pageAsset, renderPage, type PageCard } from './page.ts';
import { DASHBOARD_PUBLISHED, type DashboardPublishedEvent } from './public.ts';
import { filterQuery } from './schemas.ts';

export interface PublishRouteDeps {
  storage: Storage;
  store: DashboardStore;
  links: LinkStore;
  cards: CardService;
  events: DomainEvents;
  delegation: Delegation;
  enablement: PluginEnablementService;
  /** The audit log: a page's reads are recorded as its publisher's, in the link's organization. */
  audit: ServiceType<typeof kernelServices.audit>;
  branding: OrganizationBranding;
  /** The dashboards plugin's own id: a page of an organization where it is off is not found. */
  pluginId: string;
  log: { warn(details: object, message: string): void };
}

const DAY_MS = 86_400_000;
/** A link lives at most a year, by default 30 days. */
const MAX_LINK_DAYS = 365;
const DEFAULT_LINK_DAYS = 30;

const idParams = s.idParam('id');
const linkParams = idParams.extend(s.idParam('link_id').shape);
const base = { security: 'bearer', orgScoped: true } as const;

const linkSchema = z
  .object({
    id: z.number().int(),
    dashboard_id: z.number().int(),
    published_by: z.number().int().describe('The user whose view of the data the page shows (PII always masked)'),
    created_at: z.string(),
    expires_at: z.string(),
    revoked_at: z.string().nullable(),
    state: z.enum(['active', 'expired', 'revoked']),
  })
  .meta({ id: 'DashboardLink' });

/** Every published page answers the same "not found", whatever made its link unusable: nothing is told to a stranger. */
const GONE = 'no published dashboard at this link (it may have been revoked or have expired)';

export function publishRoutes(deps: PublishRouteDeps) {
  const { storage, store, links, cards, events, delegation, enablement, branding, pluginId, log } = deps;
  const auditLog = deps.audit;

  /** The live link a token names, in an organization where dashboards are on, and its publisher's rights of now; else 404. */
  async function resolve(token: string): Promise<{ link: NonNullable<Awaited<ReturnType<LinkStore['live']>>>; publisher: UserPrincipal }> {
    const link = await links.live(token);
    if (!link || !(await enablement.isEnabled(pluginId, link.org_id))) throw problems.notFound(GONE);
    const publisher = await delegation.actFor(link.publisher.userId, link.org_id, link.publisher.scopes);
    if ('refused' in publisher || !publisher.capabilities.has('dashboards.read') || !publisher.capabilities.has('datasets.read')) throw problems.notFound(GONE);
    return { link, publisher };
  }

  /**
   * Each card of the dashboard as it was published, its data as the publisher sees it now, PII
   * masked; a card that cannot be computed says why and the others still show. Its reads are
   * audited as the publisher's, in the link's organization.
   */
  async function pageCards(token: string, filters: Record<string, string | string[]>) {
    const { link, publisher } = await resolve(token);
    const dashboard = link.snapshot;
    const audit = auditLog.forPrincipal(publisher, link.org_id);
    const drawn: PageCard[] = [];
    for (const card of dashboard.cards) {
      const drawnCard: PageCard = { id: card.id, type: card.type, title: card.title, layout: card.layout, data: null, error: null };
      try {
        drawnCard.data = (await cards.data(dashboard, card, filters, publisher, audit, { maskPii: true })).data;
      } catch (err) {
        // A filter the page's URL got wrong is the visitor's mistake: the page answers it as a 400.
        if (err instanceof HttpProblem && err.status === 400 && err.options.errors?.some((e) => e.path.startsWith('query.'))) throw err;
        if (!(err instanceof HttpProblem)) log.warn({ err, dashboard_id: dashboard.id, card_id: card.id }, 'a published card could not be computed');
        drawnCard.error = err instanceof HttpProblem && err.status < 500 ? err.detail : 'this card could not be computed';
      }
      drawn.push(drawnCard);
    }
    return { link, dashboard, drawn };
  }

  return [
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/publish',
      summary: 'Publish a dashboard as a share link',
      description: `A signed, revocable link to an HTML page of the dashboard as it is now (later changes to its cards do not reach the link: publish again) that anyone holding it can open, no account needed (GET /p/dashboards/{token}). The page shows the data as the caller sees it when it is opened (their rights of that moment, narrowed to this token's scopes; PII columns always masked); it stops working when revoked, when it expires (\`expires_at\`: at most ${MAX_LINK_DAYS} days ahead, default ${DEFAULT_LINK_DAYS}), or when the caller loses the right to read it. Needs datasets.read as well. The token is answered once. Publishes the \`${DASHBOARD_PUBLISHED}\` event.`,
      capability: 'dashboards.write',
      request: { params: idParams, body: z.object({ expires_at: z.iso.datetime({ offset: true }).optional() }).strict() },
      responses: {
        201: { description: 'The link, with its token and URL (answered only now)', schema: linkSchema.extend({ token: z.string(), url: z.string().describe('The page, relative to this server') }) },
      },
      handler: async ({ params, body, orgId, principal, audit }) => {
        // The page lends the caller's rights to read datasets to whoever holds the link.
        if (!principal.capabilities.has('datasets.read')) throw problems.forbidden('a published dashboard reads with your rights to read datasets: this needs the capability "datasets.read"');
        const now = Date.now();
        const expires = body.expires_at ? Date.parse(body.expires_at) : now + DEFAULT_LINK_DAYS * DAY_MS;
        if (expires <= now) throw problems.badRequest('expires_at must be in the future', [{ path: 'body.expires_at', message: 'in the past' }]);
        if (expires > now + MAX_LINK_DAYS * DAY_MS) throw problems.badRequest(`expires_at must be at most ${MAX_LINK_DAYS} days ahead`, [{ path: 'body.expires_at', message: `more than ${MAX_LINK_DAYS} days ahead` }]);
        const dashboard = await store.get(orgId, params.id);
        const expiresAt = new Date(expires).toISOString();
        const { link, token } = await storage.transaction(async (trx) => {
          const created = await links.create(trx, dashboard, storedActorOf(principal), expiresAt);
          await events.publish({ type: DASHBOARD_PUBLISHED, orgId, payload: { dashboard_id: dashboard.id, link_id: created.link.id, name: dashboard.name, project_id: dashboard.project_id, published_by: principal.userId, created_by: dashboard.created_by, expires_at: expiresAt } satisfies DashboardPublishedEvent }, trx);
          return created;
        });
        await audit.record({ action: 'dashboards.publish', targetType: 'dashboard', targetId: dashboard.id, details: { link_id: link.id, expires_at: expiresAt } });
        return reply(201, { ...link, token, url: `/p/dashboards/${token}` });
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/publish',
      summary: 'A dashboard\u2019s share links',
      description: 'Every link ever made, live or not, without tokens.',
      capability: 'dashboards.read',
      request: { params: idParams },
      responses: { 200: { description: 'The links, oldest first', schema: z.object({ items: z.array(linkSchema) }) } },
      handler: async ({ params, orgId }) => {
        await store.get(orgId, params.id);
        return { items: await links.list(orgId, params.id) };
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/{id}/publish',
      summary: 'Unpublish a dashboard',
      description: 'Revokes every live link of the dashboard: their pages answer 404 from now on.',
      capability: 'dashboards.write',
      request: { params: idParams },
      responses: { 204: { description: 'Revoked (also when no link was live)' } },
      handler: async ({ params, orgId, principal, audit }) => {
        await store.get(orgId, params.id);
        const revoked = await links.revoke(orgId, params.id, principal.userId);
        await audit.record({ action: 'dashboards.unpublish', targetType: 'dashboard', targetId: params.id, details: { revoked } });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/{id}/publish/{link_id}',
      summary: 'Revoke one share link',
      description: 'Its page answers 404 from now on; the dashboard\u2019s other links keep working.',
      capability: 'dashboards.write',
      request: { params: linkParams },
      responses: { 204: { description: 'Revoked' }, 404: { description: 'No such live link of this dashboard' } },
      handler: async ({ params, orgId, principal, audit }) => {
        if (!(await links.revoke(orgId, params.id, principal.userId, params.link_id))) throw problems.notFound(`no live link ${params.link_id} of dashboard ${params.id} in this organization`);
        await audit.record({ action: 'dashboards.unpublish', targetType: 'dashboard', targetId: params.id, details: { revoked: 1, link_id: params.link_id } });
        return reply(204);
      },
    }),
    defineRoute({
      method: 'get',
      page: true,
      path: '/assets/{version}/{file}',
      summary: 'A file of the published dashboard pages',
      description: 'Their script, style sheet and charting library (Apache ECharts), served by the platform itself. `version` is the start of the content\u2019s SHA-256 (the pages name the current one): a file never changes under its URL, so it may be cached for a year.',
      security: 'none',
      request: { params: z.object({ version: z.string().max(64), file: z.string().max(64) }) },
      responses: { 200: { description: 'The file', content: { 'text/javascript': z.string(), 'text/css': z.string() } }, 404: { description: 'No such file, or not this version of it' } },
      handler: ({ params }) => {
        const asset = pageAsset(params.version, params.file);
        if (!asset) throw problems.notFound(`no file ${params.file} of version ${params.version}`);
        return reply(200, asset.body, { 'Content-Type': asset.type, 'Cache-Control': 'public, max-age=31536000, immutable', 'Cross-Origin-Resource-Policy': 'same-origin' });
      },
    }),
    defineRoute({
      method: 'get',
      page: true,
      secretPath: true,
      path: '/{token}',
      summary: 'A published dashboard',
      description:
        'The HTML page of a dashboard published with POST /api/dashboards/{id}/publish: every card drawn in the browser (charts and the process map with the ECharts library served here), in the organization\u2019s branding, the data as the publisher may see it now with every PII column masked. The dashboard\u2019s filters may be set in the query string as for a card\u2019s data. A strict Content-Security-Policy: nothing is loaded from another host and no inline script runs. A revoked or expired link, or one whose publisher may no longer read the dashboard, is a 404.',
      security: 'none',
      request: { params: z.object({ token: z.string().max(200) }), query: filterQuery },
      responses: { 200: { description: 'The page', content: { 'text/html': z.string() } }, 404: { description: 'No live link with this token' } },
      handler: async ({ params, query }) => {
        const { link, dashboard, drawn } = await pageCards(params.token, query);
        const [brand, logo] = await Promise.all([branding.get(link.org_id), branding.logo(link.org_id)]);
        const html = renderPage(params.token, dashboard, drawn, brand, logo !== null, new Date().toISOString());
        return reply(200, html, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': PAGE_CSP, 'Referrer-Policy': 'no-referrer', 'X-Robots-Tag': 'noindex', 'Cross-Origin-Opener-Policy': 'same-origin' });
      },
    }),
    defineRoute({
      method: 'get',
      page: true,
      secretPath: true,
      path: '/{token}/logo',
      summary: 'The logo on a published dashboard',
      description: 'The publishing organization\u2019s logo (as accepted by PUT /api/branding/logo), for the page of a live link.',
      security: 'none',
      request: { params: z.object({ token: z.string().max(200) }) },
      responses: {
        200: { description: 'The image', content: { 'image/png': z.string().meta({ format: 'binary' }), 'image/jpeg': z.string().meta({ format: 'binary' }), 'image/svg+xml': z.string().meta({ format: 'binary' }) } },
        404: { description: 'No live link with this token, or no logo' },
      },
      handler: async ({ params }) => {
        const { link } = await resolve(params.token);
        const logo = await branding.logo(link.org_id);
        if (!logo) throw problems.notFound('this organization has no logo');
        return reply(200, logo.data, { 'Content-Type': logo.type, ETag: `"${logo.sha256}"`, 'Cross-Origin-Resource-Policy': 'same-origin' });
      },
    }),
  ];
}
