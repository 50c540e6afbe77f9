import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, until, type TestKernel } from '../harness/index.ts';
import { formWith } from '../harness/documents.ts';
import type { MountedRoute } from '../../kernel/registry/generation.ts';

/**
 * Tenancy (issue 3, "Tenancy"): a member of organization B — even B's org admin — never sees or
 * changes organization A's data. The sweep walks every org-scoped route the registry serves, so
 * a route added later is covered without touching this file.
 */
describe.each(DIALECTS)('tenancy (%s)', (dialect) => {
  let t: TestKernel;
  const tag = crypto.randomBytes(4).toString('hex');
  // Strings that only ever belong to organization A: none may show up in an answer to B.
  const markers = {
    group: `alpha-group-${tag}`,
    token: `alpha-pat-${tag}`,
    user: `alpha-admin-${tag}`,
    project: `alpha-project-${tag}`,
    projectKey: `ALPHA_${tag.toUpperCase()}`,
    dataset: `alpha_ds_${tag}`,
    datasetDescription: `alpha-dataset-about-${tag}`,
    row: `alpha-row-${tag}`,
    pii: `alpha-pii-${tag}@example.test`,
    policy: `alpha-policy-${tag}`,
    connector: `alpha-hook-${tag}`,
    webhookSecret: `alpha-hook-secret-${tag}`,
    rule: `alpha-rule-${tag}`,
    output: `alpha_out_${tag}`,
    recipe: `alpha-recipe-${tag}`,
    job: `alpha-job-${tag}`,
    scenario: `alpha-scenario-${tag}`,
    dbtProject: `alpha-dbt-${tag}`,
    service: `alpha-svc-${tag}`,
    dataKey: `alpha-key-${tag}`,
    model: `alpha-model-${tag}`,
    brand: `alpha-brand-${tag}`,
    footer: `alpha-footer-${tag}`,
    logo: `alpha-logo-${tag}`,
    dashboard: `alpha-dashboard-${tag}`,
    card: `alpha-card-${tag}`,
    cardText: `alpha-card-text-${tag}`,
    webhook: `alpha-webhook-${tag}`,
    llmConnection: `alpha-llm-${tag}`,
    llmKey: `alpha-llm-key-${tag}`,
    conversation: `alpha-conversation-${tag}`,
    document: `alpha-document-${tag}`,
    knowledgeBase: `alpha-kb-${tag}`,
  };

  const orgA = 1;
  let orgB: number;
  let adminId: number;
  let aAdmin: { id: number; token: string };
  let bAdmin: { id: number; token: string };
  let groupA: number;
  let groupB: number;
  let tokenA: number;
  let tokenB: number;
  let orgScoped: MountedRoute[];
  // A's data plane: a project, a dataset with rows (one PII column), a row policy, a contract, a
  // connector and a data-quality rule with a run.
  let projectA: number;
  let datasetA: number;
  let policyA: number;
  let connectorA: number;
  let ruleA: number;
  // A's pipeline: a recipe writing a second dataset, a job building it, and the job's run.
  let outputA: number;
  let recipeA: number;
  let jobA: number;
  let runA: number;
  // A's dbt import (of a manifest holding nothing to create: A's datasets stay the two above).
  let importA: number;
  /** A's schedule of its job. */
  let scheduleA: number;
  /** A's scenario (never run: A's runs stay the job's). */
  let scenarioA: number;
  /** A's published API Service (a lookup on A's dataset) and a data API key of it. */
  let serviceA: number;
  let dataKeyA: number;
  /** A's model of the registry, trained on A's dataset (its training run is A's third run). */
  let modelA: number;
  /** A's dashboard: a process map of A's dataset, and a text card (a marker in its Markdown). */
  let dashboardA: number;
  let cardA: number;
  /** A share link of A's dashboard (live: revoking it would show in A's snapshot). */
  let linkA: number;
  /** A's webhook subscription (to an event the suite never causes) and its ping's delivery. */
  let webhookA: number;
  let llmConnectionA: number;
  let llmQuotaA: number;
  let conversationA: number;
  let documentA: number;
  let knowledgeBaseA: number;
  let deliveryA: number;
  /** A loopback peer behind A's connector: counts the calls reaching A's webhook. */
  let hook: { url: string; calls: string[]; close: () => Promise<void> };

  const asA = { headers: { 'X-Org-Id': String(orgA) } };
  const asB = (orgId: number | string) => ({ token: bAdmin.token, headers: { 'X-Org-Id': String(orgId) } });
  const csv = (text: string, orgId: number | string) => ({ body: text, headers: { 'X-Org-Id': String(orgId), 'content-type': 'text/csv' } });

  async function createUser(username: string, defaultOrgId: number) {
    const res = await t.request('POST', '/api/users', { body: { username, email: `${username}@example.test`, role: 'viewer', default_org_id: defaultOrgId } });
    expect(res.status, res.text).toBe(201);
    return { id: res.body.id as number, token: await t.kernel.issueToken({ id: res.body.id, role: 'viewer' }) };
  }

  async function createGroup(orgId: number, name: string, capabilities: string[], member: number) {
    const created = await t.request('POST', '/api/groups', { headers: { 'X-Org-Id': String(orgId) }, body: { name, capabilities } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.org_id).toBe(orgId);
    const added = await t.request('POST', `/api/groups/${created.body.id}/members`, { headers: { 'X-Org-Id': String(orgId) }, body: { user_id: member } });
    expect(added.status, added.text).toBe(201);
    return created.body.id as number;
  }

  async function startHook() {
    const calls: string[] = [];
    const server = http.createServer((req, res) => {
      calls.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  }

  /** Organization A's data plane, created by the platform admin working in A. */
  async function seedDataPlaneOfA() {
    const project = await t.request('POST', '/api/projects', { ...asA, body: { key: markers.projectKey, name: markers.project } });
    expect(project.status, project.text).toBe(201);
    projectA = project.body.id;

    const columns = [
      { name: 'label', type: 'string' },
      { name: 'email', type: 'string', pii: true },
      { name: 'amount', type: 'integer' },
    ];
    const dataset = await t.request('POST', '/api/datasets', { ...asA, body: { name: markers.dataset, project_id: projectA, description: markers.datasetDescription, columns } });
    expect(dataset.status, dataset.text).toBe(201);
    expect(dataset.body.org_id).toBe(orgA);
    datasetA = dataset.body.id;
    const upload = await t.request('POST', `/api/datasets/${datasetA}/data`, csv(`label,email,amount\n${markers.row},${markers.pii},10\n${markers.row}-2,${markers.pii},20\n`, orgA));
    expect(upload.status, upload.text).toBe(200);
    const rows = await t.request('POST', `/api/datasets/${datasetA}/rows`, { ...asA, body: [{ label: `${markers.row}-3`, email: markers.pii, amount: 30 }] });
    expect(rows.status, rows.text).toBe(200);
    expect(rows.body.dataset.row_count).toBe(3);

    const policy = await t.request('POST', `/api/datasets/${datasetA}/row-policies`, { ...asA, body: { group_id: groupA, filters: ['amount:gt:15'], description: markers.policy } });
    expect(policy.status, policy.text).toBe(201);
    policyA = policy.body.id;
    const contract = await t.request('POST', `/api/datasets/${datasetA}/contract`, asA);
    expect(contract.status, contract.text).toBe(201);

    const connector = await t.request('POST', '/api/connectors', { ...asA, body: { name: markers.connector, type: 'workflow_webhook', config: { webhook_url: `${hook.url}/alpha/${markers.webhookSecret}` } } });
    expect(connector.status, connector.text).toBe(201);
    connectorA = connector.body.id;

    // A rule every row breaks: its run history holds a sample of A's rows (the row marker).
    const rule = await t.request('POST', '/api/data-quality/rules', { ...asA, body: { dataset_id: datasetA, name: markers.rule, type: 'allowed_values', params: { column: 'label', values: ['none-of-them'] } } });
    expect(rule.status, rule.text).toBe(201);
    ruleA = rule.body.id;
    const run = await t.request('POST', `/api/data-quality/rules/${ruleA}/run`, asA);
    expect(run.status, run.text).toBe(200);
    expect(run.body).toMatchObject({ status: 'failed', failing_rows: 3 });
    expect(JSON.stringify(run.body.sample)).toContain(markers.row);

    // A's own choice for a plugin: B turning it off for A would show in A's snapshot.
    const chosen = await t.request('PUT', `/api/plugins/${PLUGIN_OF_A}/organizations/${orgA}`, { ...asA, body: { enabled: true } });
    expect(chosen.status, chosen.text).toBe(200);

    // A's pipeline, built once: the output holds A's rows too.
    const output = await t.request('POST', '/api/datasets', { ...asA, body: { name: markers.output, project_id: projectA, columns: [] } });
    expect(output.status, output.text).toBe(201);
    outputA = output.body.id;
    const recipe = await t.request('POST', '/api/pipeline/recipes', { ...asA, body: { project_id: projectA, name: markers.recipe, type: 'filter', inputs: [datasetA], outputs: [outputA], params: { conditions: ['amount:gt:1'] } } });
    expect(recipe.status, recipe.text).toBe(201);
    recipeA = recipe.body.id;
    const job = await t.request('POST', '/api/pipeline/jobs', { ...asA, body: { project_id: projectA, name: markers.job, targets: [outputA] } });
    expect(job.status, job.text).toBe(201);
    jobA = job.body.id;
    const build = await t.request('POST', `/api/pipeline/jobs/${jobA}/run`, asA);
    expect(build.status, build.text).toBe(202);
    runA = build.body.run.id;
    const built = await until(() => t.request('GET', `/api/pipeline/runs/${runA}`, asA), (r) => r.body.status === 'succeeded');
    expect(built.body.status, built.text).toBe('succeeded');
    const schedule = await t.request('POST', '/api/scheduler/schedules', { ...asA, body: { project_id: projectA, name: markers.job, target: { job_id: jobA }, cron: '0 3 1 1 *' } });
    expect(schedule.status, schedule.text).toBe(201);
    scheduleA = schedule.body.id;
    const scenario = await t.request('POST', '/api/pipeline/scenarios', { ...asA, body: { project_id: projectA, name: markers.scenario, steps: [{ type: 'build', params: { targets: [outputA] } }], triggers: [{ type: 'dataset_changed', datasets: [datasetA], debounce_s: 3600 }] } });
    expect(scenario.status, scenario.text).toBe(201);
    scenarioA = scenario.body.id;
    const dbtManifest = { metadata: { dbt_schema_version: 'https://schemas.getdbt.com/dbt/manifest/v12.json', project_name: markers.dbtProject }, nodes: {}, sources: {} };
    const imported = await t.request('POST', '/api/dbt/imports', { ...asA, body: { project_id: projectA, manifest: dbtManifest } });
    expect(imported.status, imported.text).toBe(201);
    importA = imported.body.id;
    const model = await t.request('POST', '/api/registry/models', { ...asA, body: { project_id: projectA, name: markers.model, dataset_id: datasetA, target: 'amount', features: ['label'], task: 'regression', algorithm: 'linear' } });
    expect(model.status, model.text).toBe(202);
    modelA = model.body.model.id;
    const trained = await until(() => t.request('GET', `/api/pipeline/runs/${model.body.run.id}`, asA), (r) => r.body.status === 'succeeded');
    expect(trained.body.status, trained.text).toBe('succeeded');

    const service = await t.request('POST', '/api/publishing/api-services', { ...asA, body: { project_id: projectA, name: markers.service, key: markers.service, endpoints: [{ name: 'by-label', kind: 'lookup', config: { dataset_id: datasetA, keys: ['label'] } }] } });
    expect(service.status, service.text).toBe(201);
    serviceA = service.body.id;
    expect((await t.request('POST', `/api/publishing/api-services/${serviceA}/publish`, asA)).status).toBe(200);
    const dataKey = await t.request('POST', `/api/publishing/api-services/${serviceA}/keys`, { ...asA, body: { name: markers.dataKey } });
    expect(dataKey.status, dataKey.text).toBe(201);
    dataKeyA = dataKey.body.id;

    // A's branding and logo (its title a marker).
    expect((await t.request('PUT', '/api/branding', { ...asA, body: { display_name: markers.brand, primary_color: '#123456', email_footer: markers.footer } })).status).toBe(200);
    const logo = await t.request('PUT', '/api/branding/logo', { headers: { ...asA.headers, 'content-type': 'image/svg+xml' }, body: svgWithTitle(markers.logo) });
    expect(logo.status, logo.text).toBe(200);

    const dashboard = await t.request('POST', '/api/dashboards', {
      ...asA,
      body: {
        project_id: projectA,
        name: markers.dashboard,
        filters: [{ column: 'label' }],
        cards: [
          { type: 'table', title: markers.card, config: { dataset_id: datasetA, columns: ['label', 'email'] } },
          { type: 'text', config: { markdown: markers.cardText } },
        ],
      },
    });
    expect(dashboard.status, dashboard.text).toBe(201);
    dashboardA = dashboard.body.id;
    cardA = dashboard.body.cards[0].id;
    const cardData = await t.request('GET', `/api/dashboards/${dashboardA}/cards/${cardA}/data`, asA);
    expect(cardData.text).toContain(markers.row);
    const link = await t.request('POST', `/api/dashboards/${dashboardA}/publish`, { ...asA, body: {} });
    expect(link.status, link.text).toBe(201);
    linkA = link.body.id;
    const webhook = await t.request('POST', '/api/webhooks', { ...asA, body: { event_type: 'schema.drift.detected', target_url: `${hook.url}/alpha-webhook`, secret: `${markers.webhookSecret}-signing`, description: markers.webhook } });
    expect(webhook.status, webhook.text).toBe(201);
    webhookA = webhook.body.id;
    const ping = await t.request('POST', `/api/webhooks/${webhookA}/ping`, asA);
    expect(ping.body.status, ping.text).toBe('succeeded');
    deliveryA = ping.body.id;
    // A's LLM connection (its key a marker) and a quota on it.
    const llm = await t.request('POST', '/api/llm-mesh/connections', { ...asA, body: { name: markers.llmConnection, provider: 'openai_compatible', config: { base_url: `${hook.url}/alpha-llm/v1`, api_key: markers.llmKey, default_model: 'm' } } });
    expect(llm.status, llm.text).toBe(201);
    llmConnectionA = llm.body.id;
    const quota = await t.request('POST', '/api/llm-mesh/quotas', { ...asA, body: { scope: 'connection', scope_id: llmConnectionA, amount_usd: 10, period: 'month' } });
    expect(quota.status, quota.text).toBe(201);
    llmQuotaA = quota.body.id;
    const conversation = await t.request('POST', '/api/chat/conversations', { ...asA, body: { title: markers.conversation, connection_id: llmConnectionA, system_prompt: markers.conversation } });
    expect(conversation.status, conversation.text).toBe(201);
    conversationA = conversation.body.id;
    // A's document (its text a marker) and a knowledge base.
    const documentForm = formWith({ name: `${markers.document}.txt`, type: 'text/plain', content: `${markers.document} says ${markers.row}` });
    const document = await t.request('POST', '/api/knowledge/documents', { headers: { ...asA.headers, 'content-type': documentForm.contentType }, body: documentForm.body });
    expect(document.status, document.text).toBe(201);
    documentA = document.body.id;
    const knowledgeBase = await t.request('POST', '/api/knowledge-bases', { ...asA, body: { project_id: projectA, name: markers.knowledgeBase } });
    expect(knowledgeBase.status, knowledgeBase.text).toBe(201);
    knowledgeBaseA = knowledgeBase.body.id;

    // A cached profile of A's dataset, whose top values are A's rows.
    const profile = await t.request('GET', `/api/statistics/datasets/${datasetA}`, asA);
    expect(profile.status, profile.text).toBe(200);
    expect(profile.text).toContain(markers.row);

    // What there is to leak: A's own reads show every marker of the data plane.
    const shown = await t.request('GET', `/api/datasets/${datasetA}/rows`, asA);
    expect(shown.text).toContain(markers.row);
    expect(shown.text).toContain(markers.pii);
  }

  beforeAll(async () => {
    hook = await startHook();
    // Outbound calls to loopback are allowed, so a connector reached across organizations would really call A's webhook.
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' } });
    adminId = (await t.request('GET', '/api/me')).body.user.id;

    const b = await t.request('POST', '/api/organizations', { body: { name: `beta-${tag}` } });
    expect(b.status, b.text).toBe(201);
    orgB = b.body.id;
    expect(orgB).not.toBe(orgA);

    // Organization A: its admin (org.admin through a group), a group, a token, audit events.
    aAdmin = await createUser(markers.user, orgA);
    groupA = await createGroup(orgA, markers.group, ['org.admin'], aAdmin.id);
    const patA = await t.request('POST', '/api/auth/tokens', { token: aAdmin.token, body: { name: markers.token } });
    expect(patA.status, patA.text).toBe(201);
    tokenA = patA.body.id;
    await seedDataPlaneOfA();

    // Organization B: its admin, holding every capability a group can grant (in B only), and a token of its own.
    // Platform-wide capabilities are the admin role's alone: a group refuses them.
    const scopes = await t.request('GET', '/api/auth/scopes');
    const known = scopes.body.map((c: { name: string }) => c.name);
    const everything = [...t.kernel.registry.current.capabilities.values()].filter((c) => c.scope === 'organization').map((c) => c.name);
    expect(known).toEqual(expect.arrayContaining(everything));
    expect(everything).toEqual(expect.arrayContaining(['org.admin', 'datasets.write', 'datasets.pii.read', 'datasets.policies.bypass', 'connectors.use', 'projects.write']));
    bAdmin = await createUser(`beta-admin-${tag}`, orgB);
    groupB = await createGroup(orgB, `beta-admins-${tag}`, everything, bAdmin.id);
    const patB = await t.request('POST', '/api/auth/tokens', { token: bAdmin.token, body: { name: `beta-pat-${tag}` } });
    expect(patB.status, patB.text).toBe(201);
    tokenB = patB.body.id;

    // The platform admin created B and so joined it; leave, so entering B is cross-organization.
    const left = await t.request('DELETE', `/api/organizations/${orgB}/members/${adminId}`);
    expect(left.status, left.text).toBe(204);

    orgScoped = t.kernel.registry.current.routes.filter((m) => m.route.orgScoped === true);
  });
  afterAll(async () => {
    await t?.stop();
    await hook?.close();
  });

  const svgWithTitle = (title: string) => `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><title>${title}</title><rect width="10" height="10"/></svg>`;

  /** A's resource a path parameter of this route names, when this suite created one. */
  function resourceOfA(m: MountedRoute, name: string): number | undefined {
    if (name === 'user_id') return aAdmin.id;
    if (name === 'org_id') return orgA;
    if (name === 'policy_id') return policyA;
    if (name === 'key_id') return dataKeyA;
    if (name === 'card_id') return cardA;
    if (name === 'link_id') return linkA;
    if (name === 'delivery_id') return deliveryA;
    if (name === 'document_id') return documentA;
    if (name === 'project_id') return projectA;
    if (name !== 'id') return undefined;
    if (m.path.startsWith('/api/groups/')) return groupA;
    if (m.path.startsWith('/api/auth/tokens/admin/')) return tokenA;
    if (m.path.startsWith('/api/projects/')) return projectA;
    if (m.path.startsWith('/api/datasets/')) return datasetA;
    if (m.path.startsWith('/api/connectors/')) return connectorA;
    if (m.path.startsWith('/api/data-quality/rules/')) return ruleA;
    if (m.path.startsWith('/api/data-quality/datasets/')) return datasetA;
    if (m.path.startsWith('/api/statistics/datasets/')) return datasetA;
    if (m.path.startsWith('/api/lineage/datasets/')) return datasetA;
    if (m.path.startsWith('/api/pipeline/recipes/')) return recipeA;
    if (m.path.startsWith('/api/pipeline/jobs/')) return jobA;
    if (m.path.startsWith('/api/pipeline/runs/')) return runA;
    if (m.path.startsWith('/api/scheduler/schedules/')) return scheduleA;
    if (m.path.startsWith('/api/pipeline/scenarios/')) return scenarioA;
    if (m.path.startsWith('/api/dbt/imports/')) return importA;
    if (m.path.startsWith('/api/publishing/api-services/')) return serviceA;
    if (m.path.startsWith('/api/registry/models/')) return modelA;
    if (m.path.startsWith('/api/dashboards/')) return dashboardA;
    if (m.path.startsWith('/api/webhooks/')) return webhookA;
    if (m.path.startsWith('/api/llm-mesh/connections/')) return llmConnectionA;
    if (m.path.startsWith('/api/llm-mesh/quotas/')) return llmQuotaA;
    if (m.path.startsWith('/api/chat/conversations/')) return conversationA;
    if (m.path.startsWith('/api/knowledge/documents/')) return documentA;
    if (m.path.startsWith('/api/knowledge-bases/')) return knowledgeBaseA;
    return undefined;
  }

  /** Path parameters that are not ids: the value that names something real of A's resource. */
  const NAMED_PARAMS: Record<string, string> = { action: 'send_message', column: 'label', name: 'by-label' };

  /** The plugin whose switch A set (see seedDataPlaneOfA): the one a plugin id in a path names. */
  const PLUGIN_OF_A = 'workflow_webhook';

  /** A concrete path for a mounted route, its parameters filled with A's resources (else 1). */
  function pathFor(m: MountedRoute): string {
    return m.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      if (name === 'id' && m.path.startsWith('/api/plugins/')) return PLUGIN_OF_A;
      // A real tool, so the arguments naming A's dataset are tried (a made-up name would stop at "no such tool").
      if (name === 'name' && m.path.startsWith('/api/agent-tools/')) return 'dataset_lookup';
      return String(resourceOfA(m, name) ?? NAMED_PARAMS[name] ?? 1);
    });
  }

  /** A query naming A's resources, for the list routes that filter by one. */
  function queryFor(m: MountedRoute): string {
    const queries: Record<string, string> = {
      'GET /api/datasets': `?project_id=${projectA}`,
      'GET /api/data-quality/rules': `?dataset_id=${datasetA}`,
      'GET /api/pipeline/recipes': `?project_id=${projectA}`,
      'GET /api/pipeline/jobs': `?project_id=${projectA}`,
      'GET /api/pipeline/runs': `?project_id=${projectA}`,
      'GET /api/scheduler/schedules': `?project_id=${projectA}`,
      'GET /api/pipeline/scenarios': `?project_id=${projectA}`,
      'GET /api/dbt/imports': `?project_id=${projectA}`,
      'GET /api/registry/models': `?project_id=${projectA}`,
      'GET /api/publishing/assets': `?project_id=${projectA}`,
      'GET /api/dashboards': `?project_id=${projectA}`,
      'GET /api/dashboards/{id}/cards/{card_id}/data': `?label=${encodeURIComponent(markers.row)}`,
      'GET /api/dashboards/{id}/cards/{card_id}/export': `?label=${encodeURIComponent(markers.row)}`,
    };
    return queries[`${m.route.method.toUpperCase()} ${m.path}`] ?? '';
  }

  /** The URL a sweep calls: path and query. */
  const urlFor = (m: MountedRoute) => `${pathFor(m)}${queryFor(m)}`;

  /** True when a path parameter of the route names one of A's resources (or A itself). */
  const namesResourceOfA = (m: MountedRoute) => [...m.path.matchAll(/\{([^}]+)\}/g)].some(([, name]) => resourceOfA(m, name) !== undefined);

  /**
   * A body the route would accept, so a refusal is about the organization and nothing else. Bodies
   * name A's resources where they can (a group, a project, a dataset), never a marker string: an
   * answer echoing the caller's own body must not pass for a leak.
   */
  function bodyFor(m: MountedRoute): unknown {
    if (!m.route.request?.body) return undefined;
    const key = `${m.route.method.toUpperCase()} ${m.path}`;
    const bodies: Record<string, unknown> = {
      'POST /api/groups': { name: `sweep-${tag}`, capabilities: ['groups.read'] },
      'PATCH /api/groups/{id}': { name: `renamed-${tag}`, capabilities: ['org.admin', 'groups.read'] },
      'POST /api/groups/{id}/members': { user_id: bAdmin.id },
      'POST /api/projects': { key: `SWEEP_${tag.toUpperCase()}`, name: `sweep-${tag}` },
      'PATCH /api/projects/{id}': { name: `renamed-${tag}`, description: `sweep-${tag}` },
      'POST /api/datasets': { name: `sweep_ds_${tag}`, project_id: projectA },
      'PATCH /api/datasets/{id}': { name: `renamed_${tag}`, description: `sweep-${tag}`, columns: [{ name: 'email', pii: false }] },
      'POST /api/datasets/{id}/rows': [{ label: `sweep-${tag}`, email: 'sweep@example.test', amount: 1 }],
      'POST /api/datasets/{id}/row-policies': { group_id: groupA, filters: ['amount:gt:1000'], description: `sweep-${tag}` },
      'POST /api/connectors': { name: `sweep-hook-${tag}`, type: 'workflow_webhook', config: { webhook_url: `${hook.url}/beta` } },
      'PATCH /api/connectors/{id}': { name: `renamed-${tag}`, config: { webhook_url: `${hook.url}/stolen` } },
      'POST /api/connectors/{id}/actions/{action}': { message: `sweep-${tag}` },
      'POST /api/data-quality/rules': { dataset_id: datasetA, name: `sweep-rule-${tag}`, type: 'not_null', params: { column: 'label' } },
      'PATCH /api/data-quality/rules/{id}': { name: `renamed-${tag}`, enabled: false, params: { column: 'label', values: ['x'] } },
      // A's dataset by name, in upper case and quoted (Postgres folds an unquoted name): names match
      // ignoring case, and the refusal echoing B's own query ("no dataset named …") cannot be taken
      // for A's marker.
      'PUT /api/plugins/{id}/organizations/{org_id}': { enabled: false },
      'POST /api/pipeline/recipes': { project_id: projectA, name: `sweep-${tag}`, type: 'filter', inputs: [datasetA], outputs: [outputA], params: { conditions: ['amount:gt:1'] } },
      'PATCH /api/pipeline/recipes/{id}': { name: `renamed-${tag}`, params: { conditions: ['amount:gt:2'] } },
      'POST /api/pipeline/jobs': { project_id: projectA, name: `sweep-${tag}`, targets: [outputA] },
      'PATCH /api/pipeline/jobs/{id}': { name: `renamed-${tag}`, mode: 'force' },
      'POST /api/scheduler/schedules': { project_id: projectA, name: `sweep-${tag}`, target: { job_id: jobA }, cron: '0 3 * * *' },
      'PATCH /api/scheduler/schedules/{id}': { name: `renamed-${tag}`, cron: '* * * * * *' },
      'POST /api/pipeline/scenarios': { project_id: projectA, name: `sweep-${tag}`, steps: [{ type: 'build', params: { targets: [outputA] } }] },
      'PATCH /api/pipeline/scenarios/{id}': { name: `renamed-${tag}`, steps: [{ type: 'capture_contract', params: { datasets: [datasetA] } }] },
      'POST /api/registry/models': { project_id: projectA, name: `sweep-${tag}`, dataset_id: datasetA, target: 'amount', features: ['label'], task: 'regression', algorithm: 'linear' },
      'POST /api/registry/models/{id}/active': { version: 1 },
      'POST /api/registry/imported-models': { project_id: projectA, name: `sweep-${tag}`, task: 'regression' },
      'POST /api/registry/models/{id}/predict': { rows: [{ label: 'x' }] },
      'POST /api/sql': { sql: `select label, email, amount from "${markers.dataset.toUpperCase()}"` },
      'POST /api/publishing/api-services': { project_id: projectA, name: `sweep-${tag}`, key: `sweep-${tag}`, endpoints: [{ name: 'l', kind: 'lookup', config: { dataset_id: datasetA, keys: ['label'] } }] },
      'PATCH /api/publishing/api-services/{id}': { name: `renamed-${tag}`, endpoints: [{ name: 'l', kind: 'lookup', config: { dataset_id: datasetA, keys: ['amount'] } }] },
      'POST /api/publishing/api-services/{id}/keys': { name: `sweep-${tag}` },
      'POST /api/publishing/api-services/{id}/endpoints/{name}/test': { query: { label: 'x' } },
      'PUT /api/branding': { display_name: `sweep-${tag}`, primary_color: '#000000' },
      'POST /api/dashboards': { project_id: projectA, name: `sweep-${tag}`, cards: [{ type: 'table', config: { dataset_id: datasetA } }] },
      'PATCH /api/dashboards/{id}': { name: `renamed-${tag}`, filters: [] },
      'POST /api/dashboards/{id}/cards': { type: 'table', config: { dataset_id: datasetA } },
      'PATCH /api/dashboards/{id}/cards/{card_id}': { title: `renamed-${tag}`, config: { dataset_id: datasetA } },
      'POST /api/dashboards/{id}/publish': {},
      'POST /api/webhooks': { event_type: 'dataset.updated', target_url: `${hook.url}/beta`, secret: `sweep-secret-${tag}` },
      'PATCH /api/webhooks/{id}': { target_url: `${hook.url}/stolen`, secret: `sweep-secret-${tag}` },
      'POST /api/llm-mesh/connections': { name: `sweep-${tag}`, provider: 'openai_compatible', config: { base_url: `${hook.url}/beta/v1` } },
      'PATCH /api/llm-mesh/connections/{id}': { config: { base_url: `${hook.url}/stolen/v1` } },
      'POST /api/llm-mesh/completions': { connection_id: llmConnectionA, messages: [{ role: 'user', content: `sweep-${tag}` }] },
      'POST /api/llm-mesh/embeddings': { connection_id: llmConnectionA, input: [`sweep-${tag}`] },
      'POST /api/llm-mesh/quotas': { scope: 'connection', scope_id: llmConnectionA, amount_usd: 1, period: 'month' },
      'POST /api/agent-tools/{name}/invoke': { arguments: { dataset: markers.dataset.toUpperCase() } },
      'POST /api/chat/conversations': { connection_id: llmConnectionA, knowledge_base_ids: [knowledgeBaseA] },
      'POST /api/chat/conversations/{id}/messages': { content: `sweep-${tag}` },
      'POST /api/knowledge-bases': { project_id: projectA, name: `sweep-${tag}` },
      'POST /api/knowledge-bases/{id}/documents': { document_ids: [documentA] },
      'POST /api/knowledge-bases/{id}/search': { query: markers.row },
      'POST /api/knowledge-bases/{id}/ask': { question: markers.row, connection_id: llmConnectionA },
    };
    if (!(key in bodies)) throw new Error(`no body for ${key}: give the sweep one the route accepts`);
    return bodies[key];
  }

  /** The request options of a sweep call: a body (JSON, or CSV for a streamed upload) and its headers. */
  function requestFor(m: MountedRoute, caller: { token: string; headers: Record<string, string> }) {
    if (m.route.request?.stream?.contentTypes.includes('application/json')) {
      // A dbt import into A's project, of a manifest that would create a dataset were the project found.
      const manifest = { metadata: { dbt_schema_version: 'https://schemas.getdbt.com/dbt/manifest/v12.json' }, nodes: { 'seed.p.s': { unique_id: 'seed.p.s', resource_type: 'seed', name: `sweep_${tag}` } } };
      return { ...caller, body: { project_id: projectA, manifest } };
    }
    if (m.route.request?.stream?.contentTypes.includes('image/svg+xml')) {
      // A logo: it would replace the organization's own.
      return { token: caller.token, body: svgWithTitle(`sweep-${tag}`), headers: { ...caller.headers, 'content-type': 'image/svg+xml' } };
    }
    if (m.route.request?.stream?.contentTypes.join() === 'multipart/form-data') {
      // A form without a file: an ONNX import into A's model is refused before its form is read; a
      // document upload finds no file (400) and stores nothing.
      const boundary = `sweep-${tag}`;
      const form = `--${boundary}\r\ncontent-disposition: form-data; name="output"\r\n\r\n{"task":"regression"}\r\n--${boundary}--\r\n`;
      return { token: caller.token, body: form, headers: { ...caller.headers, 'content-type': `multipart/form-data; boundary=${boundary}` } };
    }
    if (m.route.request?.stream) {
      expect(m.route.request.stream.contentTypes).toContain('text/csv');
      // The columns of A's dataset, so the upload would be accepted were the dataset found.
      return { token: caller.token, body: `label,email,amount\nsweep-${tag},sweep@example.test,1\n`, headers: { ...caller.headers, 'content-type': 'text/csv' } };
    }
    return { ...caller, body: bodyFor(m) };
  }

  /**
   * Routes whose body (not their path) names A's resource, and the status B must get: a dataset
   * in A's project (422: the project is not in B), a rule on A's dataset (404), SQL over A's
   * dataset by name (400: no such dataset in B).
   */
  const BODY_NAMES_A: Record<string, number> = { 'POST /api/datasets': 422, 'POST /api/data-quality/rules': 404, 'POST /api/sql': 400, 'POST /api/pipeline/recipes': 422, 'POST /api/pipeline/jobs': 422, 'POST /api/scheduler/schedules': 422, 'POST /api/pipeline/scenarios': 422, 'POST /api/dbt/imports': 422, 'POST /api/publishing/api-services': 422, 'POST /api/registry/models': 422, 'POST /api/registry/imported-models': 422, 'POST /api/dashboards': 422, 'POST /api/llm-mesh/completions': 404, 'POST /api/llm-mesh/embeddings': 404, 'POST /api/llm-mesh/quotas': 400, 'POST /api/chat/conversations': 400, 'POST /api/knowledge-bases': 400, 'POST /api/agent-tools/{name}/invoke': 400 };

  /** Everything A owns, read straight from the database: the sweep must leave it untouched. */
  async function snapshotA() {
    const db = t.kernel.storage.db;
    const groups = await db.selectFrom('groups').select(['id', 'name']).where('org_id', '=', orgA).orderBy('id').execute();
    const caps = await db.selectFrom('group_capabilities').select(['group_id', 'capability']).where('group_id', '=', groupA).orderBy('capability').execute();
    const members = await db.selectFrom('group_members').select(['group_id', 'user_id']).where('group_id', '=', groupA).orderBy('user_id').execute();
    const token = await db.selectFrom('personal_access_tokens').select(['id', 'revoked_at']).where('id', '=', tokenA).executeTakeFirstOrThrow();
    const orgMembers = await db.selectFrom('organization_members').select('user_id').where('org_id', '=', orgA).orderBy('user_id').execute();
    const projects = await db.selectFrom('projects').select(['id', 'key', 'name', 'description', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const datasets = await db
      .selectFrom('datasets')
      .select(['id', 'project_id', 'name', 'description', 'columns', 'row_count', 'version', 'table_name', 'updated_at'])
      .where('org_id', '=', orgA)
      .orderBy('id')
      .execute();
    // Each dataset's contents, read from its physical table.
    const contents: Record<string, unknown[]> = {};
    for (const d of datasets) {
      contents[d.id] = (await sql`select * from ${t.kernel.storage.dataTables.ref(orgA, d.table_name)} order by _row_id`.execute(db)).rows;
    }
    const contracts = await db.selectFrom('dataset_contracts').select(['id', 'dataset_id', 'version', 'columns', 'is_current']).where('org_id', '=', orgA).orderBy('id').execute();
    const policies = await db.selectFrom('row_policies').select(['id', 'dataset_id', 'group_id', 'filters', 'description']).where('org_id', '=', orgA).orderBy('id').execute();
    const connectors = await db.selectFrom('connectors').select(['id', 'name', 'type', 'config', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const rules = await db.selectFrom('dq_rules').select(['id', 'dataset_id', 'name', 'params', 'severity', 'enabled', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const runs = await db.selectFrom('dq_runs').select(['id', 'rule_id', 'status']).where('org_id', '=', orgA).orderBy('id').execute();
    const profiles = await db.selectFrom('dataset_profiles').select(['dataset_id', 'scope_key', 'version', 'computed_at']).where('org_id', '=', orgA).orderBy('dataset_id').orderBy('scope_key').execute();
    // Calls that reached A's webhook (only A's connector knows its URL).
    const webhookCalls = hook.calls.filter((c) => c.includes('/alpha/')).length;
    const recipes = await db.selectFrom('pipeline_recipes').select(['id', 'name', 'type', 'params', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const recipeLinks = await db.selectFrom('pipeline_recipe_datasets').select(['recipe_id', 'dataset_id', 'role']).where('org_id', '=', orgA).orderBy('id').execute();
    const jobs = await db.selectFrom('jobs').select(['id', 'name', 'targets', 'mode', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const pipelineRuns = await db.selectFrom('pipeline_runs').select(['id', 'status', 'ended_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const scenarios = await db.selectFrom('pipeline_scenarios').select(['id', 'name', 'steps', 'triggers', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const schedules = await db.selectFrom('scheduler_schedules').select(['id', 'name', 'cron', 'enabled', 'next_run_at', 'generation', 'owner_id', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const dbtImports = await db.selectFrom('dbt_imports').select(['id', 'summary']).where('org_id', '=', orgA).orderBy('id').execute();
    const models = await db.selectFrom('registry_models').select(['id', 'name', 'active_version', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const modelVersions = await db.selectFrom('registry_model_versions').select(['id', 'version', 'status', 'trained_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const services = await db.selectFrom('publishing_services').select(['id', 'name', 'key', 'status', 'endpoints', 'published_by', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const dataKeys = await db.selectFrom('publishing_keys').select(['id', 'service_id', 'name', 'revoked_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const branding = await db.selectFrom('branding').select(['display_name', 'primary_color', 'email_footer', 'logo_sha256', 'updated_at']).where('org_id', '=', orgA).execute();
    const dashboards = await db.selectFrom('dashboards').select(['id', 'name', 'filters', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const links = await db.selectFrom('dashboards_links').select(['id', 'dashboard_id', 'expires_at', 'revoked_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const webhooks = await db.selectFrom('webhooks').select(['id', 'event_type', 'target_url', 'secret_sealed', 'description', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const deliveries = await db.selectFrom('webhooks_deliveries').select(['id', 'status', 'attempts', 'deadline_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const cards = await db.selectFrom('dashboards_cards').select(['id', 'dashboard_id', 'type', 'title', 'config', 'layout', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const llmConnections = await db.selectFrom('llm_mesh_connections').select(['id', 'name', 'config', 'api_key_sealed', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const llmQuotas = await db.selectFrom('llm_mesh_quotas').select(['id', 'amount_usd', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const llmCalls = await db.selectFrom('llm_mesh_calls').select('id').where('org_id', '=', orgA).execute();
    const documents = await db.selectFrom('knowledge_documents').select(['id', 'name', 'text']).where('org_id', '=', orgA).orderBy('id').execute();
    const knowledgeBases = await db.selectFrom('knowledge_bases').select(['id', 'name', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const knowledgeBaseDocuments = await db.selectFrom('knowledge_bases_documents').select(['kb_id', 'document_id']).where('kb_id', '=', knowledgeBaseA).execute();
    const conversations = await db.selectFrom('chat_conversations').select(['id', 'title', 'updated_at']).where('org_id', '=', orgA).orderBy('id').execute();
    const chatMessages = await db.selectFrom('chat_messages').select('id').where('conversation_id', 'in', conversations.length ? conversations.map((c) => c.id) : [0]).execute();
    const pluginSwitches = await db.selectFrom('plugin_organizations').select(['plugin_id', 'enabled', 'updated_at']).where('org_id', '=', orgA).orderBy('plugin_id').execute();
    return { documents, knowledgeBases, knowledgeBaseDocuments, conversations, chatMessages, llmConnections, llmQuotas, llmCalls, webhooks, deliveries, dashboards, cards, links, branding, pluginSwitches, groups, caps, members, token, orgMembers, projects, datasets, contents, contracts, policies, connectors, rules, runs, profiles, webhookCalls, recipes, recipeLinks, jobs, pipelineRuns, schedules, scenarios, dbtImports, models, modelVersions, services, dataKeys };
  }

  /** A's data plane is really there, so an unchanged snapshot means something. */
  function expectDataPlaneOfA(snapshot: Awaited<ReturnType<typeof snapshotA>>) {
    expect(snapshot.projects.map((p) => p.id)).toEqual([projectA]);
    expect(snapshot.datasets).toEqual([expect.objectContaining({ id: datasetA, name: markers.dataset, version: expect.anything() }), expect.objectContaining({ id: outputA, name: markers.output })]);
    expect(snapshot.contents[outputA]).toHaveLength(3);
    expect(snapshot.recipes.map((r) => r.id)).toEqual([recipeA]);
    expect(snapshot.jobs.map((j) => j.id)).toEqual([jobA]);
    expect(snapshot.schedules.map((s) => s.id)).toEqual([scheduleA]);
    expect(snapshot.scenarios.map((s) => s.id)).toEqual([scenarioA]);
    expect(snapshot.dbtImports.map((i) => i.id)).toEqual([importA]);
    expect(snapshot.services.map((svc) => [svc.id, svc.status])).toEqual([[serviceA, 'published']]);
    expect(snapshot.dataKeys.map((k) => [k.id, k.revoked_at])).toEqual([[dataKeyA, null]]);
    expect(snapshot.pipelineRuns.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(snapshot.models.map((m) => [m.id, m.active_version])).toEqual([[modelA, 1]]);
    expect(snapshot.modelVersions.map((v) => v.status)).toEqual(['ready']);
    expect(Number(snapshot.datasets[0].row_count)).toBe(3);
    expect(snapshot.contents[datasetA]).toHaveLength(3);
    expect(JSON.stringify(snapshot.contents[datasetA])).toContain(markers.row);
    expect(snapshot.contracts.map((c) => c.dataset_id)).toEqual([datasetA]);
    expect(snapshot.policies.map((p) => p.id)).toEqual([policyA]);
    expect(snapshot.connectors.map((c) => c.id)).toEqual([connectorA]);
    expect(snapshot.rules.map((r) => r.id)).toEqual([ruleA]);
    expect(snapshot.runs).toHaveLength(1);
    expect(snapshot.profiles.length).toBeGreaterThanOrEqual(1);
    expect(snapshot.pluginSwitches).toEqual([expect.objectContaining({ plugin_id: PLUGIN_OF_A })]);
    expect(snapshot.branding).toEqual([expect.objectContaining({ display_name: markers.brand, email_footer: markers.footer, logo_sha256: expect.any(String) })]);
    expect(snapshot.dashboards.map((d) => [d.id, d.name])).toEqual([[dashboardA, markers.dashboard]]);
    expect(snapshot.cards.map((c) => c.id)).toEqual([cardA, cardA + 1]);
    expect(snapshot.links.map((l) => [l.id, l.revoked_at])).toEqual([[linkA, null]]);
    expect(snapshot.webhooks.map((w) => [w.id, w.description])).toEqual([[webhookA, markers.webhook]]);
    expect(snapshot.deliveries.map((d) => [d.id, d.status])).toEqual([[deliveryA, 'succeeded']]);
    expect(snapshot.llmConnections.map((c) => [c.id, c.name])).toEqual([[llmConnectionA, markers.llmConnection]]);
    expect(snapshot.llmQuotas.map((q) => q.id)).toEqual([llmQuotaA]);
    expect(snapshot.llmCalls).toEqual([]);
    expect(snapshot.conversations.map((c) => [c.id, c.title])).toEqual([[conversationA, markers.conversation]]);
    expect(snapshot.chatMessages).toEqual([]);
    expect(snapshot.documents.map((d) => [d.id, d.name])).toEqual([[documentA, `${markers.document}.txt`]]);
    expect(snapshot.knowledgeBases.map((b) => [b.id, b.name])).toEqual([[knowledgeBaseA, markers.knowledgeBase]]);
    expect(snapshot.knowledgeBaseDocuments).toEqual([]);
  }

  it('the registry marks the groups, audit and token-governance routes org-scoped (the sweep is not vacuous)', () => {
    const keys = orgScoped.map((m) => `${m.route.method.toUpperCase()} ${m.path}`);
    expect(keys).toEqual(
      expect.arrayContaining([
        'GET /api/groups',
        'POST /api/groups',
        'GET /api/groups/{id}',
        'PATCH /api/groups/{id}',
        'DELETE /api/groups/{id}',
        'GET /api/groups/{id}/members',
        'POST /api/groups/{id}/members',
        'DELETE /api/groups/{id}/members/{user_id}',
        'GET /api/audit',
        'GET /api/auth/tokens/admin',
        'DELETE /api/auth/tokens/admin/{id}',
        // The data plane.
        'GET /api/projects/{id}',
        'PATCH /api/projects/{id}',
        'DELETE /api/projects/{id}',
        'POST /api/datasets',
        'GET /api/datasets/{id}',
        'DELETE /api/datasets/{id}',
        'POST /api/datasets/{id}/data',
        'GET /api/datasets/{id}/rows',
        'POST /api/datasets/{id}/rows',
        'GET /api/datasets/{id}/export',
        'GET /api/datasets/{id}/contract',
        'POST /api/datasets/{id}/contract',
        'GET /api/datasets/{id}/drift',
        'GET /api/datasets/{id}/row-policies',
        'POST /api/datasets/{id}/row-policies',
        'DELETE /api/datasets/{id}/row-policies/{policy_id}',
        'GET /api/connectors/{id}',
        'PATCH /api/connectors/{id}',
        'POST /api/connectors/{id}/actions/{action}',
        'POST /api/data-quality/rules',
        'GET /api/data-quality/rules/{id}',
        'PATCH /api/data-quality/rules/{id}',
        'POST /api/data-quality/rules/{id}/run',
        'GET /api/data-quality/rules/{id}/runs',
        'POST /api/data-quality/datasets/{id}/run',
        'POST /api/sql',
        'GET /api/statistics/datasets/{id}',
        'GET /api/statistics/datasets/{id}/columns/{column}',
        'GET /api/plugins/{id}/organizations/{org_id}',
        'PUT /api/plugins/{id}/organizations/{org_id}',
        'POST /api/pipeline/recipes',
        'PATCH /api/pipeline/recipes/{id}',
        'POST /api/pipeline/recipes/{id}/run',
        'GET /api/pipeline/recipes/{id}/schema',
        'GET /api/pipeline/runs/{id}/logs',
        'POST /api/pipeline/runs/{id}/cancel',
        'GET /api/pipeline/flows/{project_id}',
        'POST /api/pipeline/jobs/{id}/run',
        'DELETE /api/pipeline/jobs/{id}',
        'POST /api/scheduler/schedules',
        'GET /api/scheduler/schedules',
        'PATCH /api/scheduler/schedules/{id}',
        'DELETE /api/scheduler/schedules/{id}',
        'POST /api/scheduler/schedules/{id}/pause',
        'POST /api/scheduler/schedules/{id}/resume',
        'GET /api/scheduler/schedules/{id}/preview',
        'GET /api/scheduler/schedules/{id}/fires',
        'POST /api/pipeline/scenarios',
        'GET /api/pipeline/scenarios',
        'GET /api/pipeline/scenarios/{id}',
        'PATCH /api/pipeline/scenarios/{id}',
        'DELETE /api/pipeline/scenarios/{id}',
        'POST /api/pipeline/scenarios/{id}/run',
        'GET /api/pipeline/step-types',
        'POST /api/publishing/api-services',
        'GET /api/publishing/api-services',
        'GET /api/publishing/api-services/{id}',
        'GET /api/publishing/api-services/{id}/usage',
        'PATCH /api/publishing/api-services/{id}',
        'DELETE /api/publishing/api-services/{id}',
        'POST /api/publishing/api-services/{id}/publish',
        'POST /api/publishing/api-services/{id}/unpublish',
        'POST /api/publishing/api-services/{id}/keys',
        'GET /api/publishing/api-services/{id}/keys',
        'DELETE /api/publishing/api-services/{id}/keys/{key_id}',
        'POST /api/publishing/api-services/{id}/endpoints/{name}/test',
        'GET /api/publishing/assets',
        'GET /api/branding',
        'PUT /api/branding',
        'GET /api/branding/logo',
        'PUT /api/branding/logo',
        'DELETE /api/branding/logo',
        'GET /api/dashboards/card-types',
        'POST /api/dashboards',
        'GET /api/dashboards',
        'GET /api/dashboards/{id}',
        'PATCH /api/dashboards/{id}',
        'DELETE /api/dashboards/{id}',
        'POST /api/dashboards/{id}/cards',
        'PATCH /api/dashboards/{id}/cards/{card_id}',
        'DELETE /api/dashboards/{id}/cards/{card_id}',
        'GET /api/dashboards/{id}/cards/{card_id}/data',
        'GET /api/dashboards/{id}/cards/{card_id}/export',
        'POST /api/dashboards/{id}/publish',
        'GET /api/dashboards/{id}/publish',
        'DELETE /api/dashboards/{id}/publish',
        'DELETE /api/dashboards/{id}/publish/{link_id}',
        'GET /api/webhooks/event-types',
        'POST /api/webhooks',
        'GET /api/webhooks',
        'GET /api/webhooks/{id}',
        'PATCH /api/webhooks/{id}',
        'DELETE /api/webhooks/{id}',
        'POST /api/webhooks/{id}/ping',
        'GET /api/webhooks/{id}/deliveries',
        'POST /api/webhooks/{id}/deliveries/{delivery_id}/redeliver',
        'GET /api/llm-mesh/providers',
        'POST /api/llm-mesh/connections',
        'GET /api/llm-mesh/connections',
        'GET /api/llm-mesh/connections/{id}',
        'PATCH /api/llm-mesh/connections/{id}',
        'DELETE /api/llm-mesh/connections/{id}',
        'POST /api/llm-mesh/connections/{id}/test',
        'POST /api/llm-mesh/completions',
        'POST /api/llm-mesh/embeddings',
        'POST /api/llm-mesh/quotas',
        'GET /api/llm-mesh/quotas',
        'DELETE /api/llm-mesh/quotas/{id}',
        'GET /api/llm-mesh/usage',
        'GET /api/llm-mesh/calls',
        'GET /api/agent-tools',
        'POST /api/agent-tools/{name}/invoke',
        'POST /api/chat/conversations',
        'GET /api/chat/conversations',
        'GET /api/chat/conversations/{id}',
        'DELETE /api/chat/conversations/{id}',
        'POST /api/chat/conversations/{id}/messages',
        'POST /api/knowledge/documents',
        'GET /api/knowledge/documents',
        'GET /api/knowledge/documents/{id}',
        'DELETE /api/knowledge/documents/{id}',
        'POST /api/knowledge-bases',
        'GET /api/knowledge-bases',
        'GET /api/knowledge-bases/{id}',
        'DELETE /api/knowledge-bases/{id}',
        'POST /api/knowledge-bases/{id}/documents',
        'DELETE /api/knowledge-bases/{id}/documents/{document_id}',
        'POST /api/knowledge-bases/{id}/search',
        'POST /api/knowledge-bases/{id}/ask',
      ]),
    );
  });

  it('every org-scoped route refuses B\u2019s org admin in organization A with 403, and A is left untouched', async () => {
    const before = await snapshotA();
    expect(before.groups.map((g) => g.id)).toContain(groupA);
    expect(before.token.revoked_at).toBeNull();
    expectDataPlaneOfA(before);
    const answers: string[] = [];
    for (const m of orgScoped) {
      const res = await t.request(m.route.method.toUpperCase(), urlFor(m), requestFor(m, asB(orgA)));
      answers.push(`${m.route.method.toUpperCase()} ${urlFor(m)} -> ${res.status}`);
      expect(res.status, `${m.route.method.toUpperCase()} ${urlFor(m)}: ${res.text}`).toBe(403);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      for (const marker of Object.values(markers)) expect(res.text).not.toContain(marker);
    }
    expect(answers.length).toBe(orgScoped.length);
    expect(await snapshotA()).toEqual(before);
  });

  it('every org-scoped route answers 400 to a non-integer X-Org-Id', async () => {
    for (const m of orgScoped) {
      const res = await t.request(m.route.method.toUpperCase(), urlFor(m), requestFor(m, asB('abc')));
      expect(res.status, `${m.route.method.toUpperCase()} ${urlFor(m)}: ${res.text}`).toBe(400);
      expect(res.body.detail).toMatch(/X-Org-Id/);
    }
  });

  it('every org-scoped route, called in B with A\u2019s ids, shows nothing of A and changes nothing of A', async () => {
    const before = await snapshotA();
    expectDataPlaneOfA(before);
    // 7 identity routes (groups, members, tokens) and 30 data-plane routes name one of A's resources.
    expect(orgScoped.filter(namesResourceOfA).length).toBeGreaterThanOrEqual(37);
    for (const key of Object.keys(BODY_NAMES_A)) expect(orgScoped.map((m) => `${m.route.method.toUpperCase()} ${m.path}`)).toContain(key);
    for (const m of orgScoped) {
      const key = `${m.route.method.toUpperCase()} ${m.path}`;
      const res = await t.request(m.route.method.toUpperCase(), urlFor(m), requestFor(m, asB(orgB)));
      const label = `${m.route.method.toUpperCase()} ${urlFor(m)}: ${res.status} ${res.text}`;
      // A route that names one of A's resources must not find it; any other may answer, with B's data only.
      if (namesResourceOfA(m)) expect(res.status, label).toBe(404);
      else if (key in BODY_NAMES_A) expect(res.status, label).toBe(BODY_NAMES_A[key]);
      else expect(res.status, label).toBeLessThan(500);
      for (const marker of Object.values(markers)) expect(res.text, label).not.toContain(marker);
    }
    expect(await snapshotA()).toEqual(before);
  });

  it('B\u2019s org admin in B sees B\u2019s groups only and cannot read, change or delete A\u2019s group', async () => {
    const list = await t.request('GET', '/api/groups', asB(orgB));
    expect(list.status).toBe(200);
    const ids = list.body.map((g: { id: number }) => g.id);
    expect(ids).toContain(groupB);
    expect(ids).not.toContain(groupA);
    expect(list.body.every((g: { org_id: number }) => g.org_id === orgB)).toBe(true);
    // Without the header the default organization (B) applies: same answer.
    const byDefault = await t.request('GET', '/api/groups', { token: bAdmin.token });
    expect(byDefault.body.map((g: { id: number }) => g.id)).toEqual(ids);

    expect((await t.request('GET', `/api/groups/${groupA}`, asB(orgB))).status).toBe(404);
    expect((await t.request('GET', `/api/groups/${groupA}/members`, asB(orgB))).status).toBe(404);
    expect((await t.request('PATCH', `/api/groups/${groupA}`, { ...asB(orgB), body: { capabilities: [] } })).status).toBe(404);
    expect((await t.request('DELETE', `/api/groups/${groupA}`, asB(orgB))).status).toBe(404);
    expect((await t.request('DELETE', `/api/groups/${groupA}/members/${aAdmin.id}`, asB(orgB))).status).toBe(404);

    const still = await t.request('GET', `/api/groups/${groupA}`, { headers: { 'X-Org-Id': String(orgA) } });
    expect(still.status).toBe(200);
    expect(still.body).toMatchObject({ id: groupA, org_id: orgA, name: markers.group, capabilities: ['org.admin'] });
  });

  it('B\u2019s org admin lists and revokes B\u2019s tokens only', async () => {
    const list = await t.request('GET', '/api/auth/tokens/admin', asB(orgB));
    expect(list.status).toBe(200);
    const ids = list.body.map((x: { id: number }) => x.id);
    expect(ids).toContain(tokenB);
    expect(ids).not.toContain(tokenA);
    expect(list.body.some((x: { user_id: number }) => x.user_id === aAdmin.id)).toBe(false);

    const revoke = await t.request('DELETE', `/api/auth/tokens/admin/${tokenA}`, asB(orgB));
    expect(revoke.status).toBe(404);
    const mine = await t.request('GET', '/api/auth/tokens', { token: aAdmin.token });
    expect(mine.body.find((x: { id: number }) => x.id === tokenA)).toMatchObject({ state: 'active', revoked_at: null });
  });

  it('B\u2019s org admin never sees A\u2019s audit events, whatever the filters', async () => {
    // A's log has events (the group, its member, the token): make sure there is something to hide.
    const aLog = await t.request('GET', '/api/audit', { token: aAdmin.token });
    expect(aLog.status).toBe(200);
    expect(aLog.body.items.map((e: { action: string }) => e.action)).toEqual(expect.arrayContaining(['group.create', 'group.member.add', 'token.mint']));

    for (const query of ['', `?org_id=${orgA}`, `?target=group:${groupA}`, `?actor=${aAdmin.id}`, '?action=token.*']) {
      const res = await t.request('GET', `/api/audit${query}`, asB(orgB));
      expect(res.status, query).toBe(200);
      for (const e of res.body.items) {
        expect(e.org_id, query).toBe(orgB);
        expect(`${e.target_type}:${e.target_id}`).not.toBe(`group:${groupA}`);
      }
      for (const marker of Object.values(markers)) expect(res.text).not.toContain(marker);
    }
    // B's own log is not empty: its group and its token are in it.
    const own = await t.request('GET', '/api/audit', asB(orgB));
    expect(own.body.items.map((e: { target_id: string }) => e.target_id)).toEqual(expect.arrayContaining([String(groupB), String(tokenB)]));
  });

  it('through a dataset of B\u2019s own, B\u2019s org admin cannot remove A\u2019s row policy nor bind a policy to A\u2019s group', async () => {
    // The sweep names A's dataset first, so the policy id never gets looked at there: here it does.
    const project = await t.request('POST', '/api/projects', { ...asB(orgB), body: { key: `BETA_${tag.toUpperCase()}`, name: `beta-project-${tag}` } });
    expect(project.status, project.text).toBe(201);
    const dataset = await t.request('POST', '/api/datasets', { ...asB(orgB), body: { name: `beta_ds_${tag}`, project_id: project.body.id, columns: [{ name: 'amount', type: 'integer' }] } });
    expect(dataset.status, dataset.text).toBe(201);
    expect(dataset.body.org_id).toBe(orgB);
    const before = await snapshotA();

    const remove = await t.request('DELETE', `/api/datasets/${dataset.body.id}/row-policies/${policyA}`, asB(orgB));
    expect(remove.status, remove.text).toBe(404);
    const bind = await t.request('POST', `/api/datasets/${dataset.body.id}/row-policies`, { ...asB(orgB), body: { group_id: groupA, filters: ['amount:gt:0'] } });
    expect(bind.status, bind.text).toBe(422);
    const listed = await t.request('GET', `/api/datasets/${dataset.body.id}/row-policies`, asB(orgB));
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual([]);
    for (const marker of Object.values(markers)) expect(remove.text + bind.text + listed.text).not.toContain(marker);
    expect(await snapshotA()).toEqual(before);
  });

  it('a user of A cannot be added to a group of B (422)', async () => {
    const res = await t.request('POST', `/api/groups/${groupB}/members`, { ...asB(orgB), body: { user_id: aAdmin.id } });
    expect(res.status, res.text).toBe(422);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const members = await t.request('GET', `/api/groups/${groupB}/members`, asB(orgB));
    expect(members.body.map((m: { user_id: number }) => m.user_id)).toEqual([bAdmin.id]);
  });

  it('a platform admin may enter an organization they do not belong to, and that is audited', async () => {
    const db = t.kernel.storage.db;
    expect(await db.selectFrom('organization_members').select('user_id').where('org_id', '=', orgB).where('user_id', '=', adminId).executeTakeFirst()).toBeUndefined();
    const count = async () =>
      Number((await db.selectFrom('audit_log').select((eb) => eb.fn.countAll().as('n')).where('action', '=', 'tenancy.cross_org_access').executeTakeFirstOrThrow()).n);
    const before = await count();

    const res = await t.request('GET', '/api/groups', { headers: { 'X-Org-Id': String(orgB) } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.map((g: { id: number }) => g.id)).toContain(groupB);
    expect(await count()).toBe(before + 1);
    // Every entry is audited, not only the first (a resolved caller is never kept for it).
    expect((await t.request('GET', '/api/groups', { headers: { 'X-Org-Id': String(orgB) } })).status).toBe(200);
    expect(await count()).toBe(before + 2);

    const audit = await t.request('GET', `/api/audit?action=tenancy.cross_org_access&org_id=${orgB}`);
    expect(audit.status).toBe(200);
    expect(audit.body.items[0]).toMatchObject({ action: 'tenancy.cross_org_access', actor_user_id: adminId, actor_username: 'admin', target_type: 'organization', target_id: String(orgB), org_id: orgB });

    // Entering one's own organization is not cross-organization access.
    await t.request('GET', '/api/groups', { headers: { 'X-Org-Id': String(orgA) } });
    expect(await count()).toBe(before + 2);

    // A platform admin naming an organization that does not exist is refused like anyone else.
    expect((await t.request('GET', '/api/groups', { headers: { 'X-Org-Id': '999999' } })).status).toBe(403);
  });
});
