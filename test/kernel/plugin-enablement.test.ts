import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, type TestKernel } from '../harness/index.ts';

/**
 * A third-party plugin as its author would write it, in a folder outside the repository (no
 * node_modules of its own: the SDK specifier brings the contract and zod): org-scoped routes
 * (notes kept per organization) and a connector type.
 */
function writeThirdPartyPlugin(root: string) {
  fs.mkdirSync(path.join(root, 'acme'));
  fs.writeFileSync(
    path.join(root, 'acme/index.ts'),
    `import { definePlugin, defineRoute, extensionPoint, problems, reply, z } from 'data-platform/plugin-api';

const connectorTypes = extensionPoint<Record<string, unknown>>('connectors.types');

export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const notes = new Map<number, string[]>();
    ctx.contribute(connectorTypes, {
      type: ctx.manifest.id + '_echo',
      description: 'Echoes its arguments',
      config: z.object({}),
      secretFields: [],
      targetFields: [],
      actions: { echo: { description: 'Answers its arguments', args: z.object({}).passthrough(), run: async ({ args }: { args: unknown }) => ({ body: args }) } },
    });
    const base = { security: 'bearer', orgScoped: true } as const;
    return {
      routes: [
        defineRoute({ ...base, method: 'get', path: '', summary: 'Notes of the organization', responses: { 200: { description: 'Notes', schema: z.array(z.string()) } }, handler: ({ orgId }) => notes.get(orgId) ?? [] }),
        defineRoute({
          ...base, method: 'post', path: '', summary: 'Add a note',
          request: { body: z.object({ text: z.string() }) },
          responses: { 201: { description: 'Its number', schema: z.object({ n: z.number() }) } },
          handler: ({ orgId, body }) => {
            const list = notes.get(orgId) ?? [];
            list.push(body.text);
            notes.set(orgId, list);
            return reply(201, { n: list.length });
          },
        }),
        defineRoute({
          ...base, method: 'get', path: '/{n}', summary: 'One note',
          request: { params: z.object({ n: z.coerce.number().int() }) },
          responses: { 200: { description: 'The note', schema: z.object({ text: z.string() }) } },
          handler: ({ orgId, params }) => {
            const text = notes.get(orgId)?.[params.n - 1];
            if (text === undefined) throw problems.notFound('no note ' + params.n);
            return { text };
          },
        }),
      ],
    };
  },
});
`,
  );
  fs.mkdirSync(path.join(root, 'manifests'));
  const manifest = (id: string, more: Record<string, unknown> = {}) =>
    fs.writeFileSync(
      path.join(root, 'manifests', `${id}.json`),
      JSON.stringify({ id, version: '1.0.0', kind: 'router', entry: '../acme/index.ts', depends_on: ['connectors'], router: { prefix: `/api/${id.replace('_', '-')}`, tag: id }, ...more }),
    );
  manifest('acme_notes');
  manifest('acme_beta', { default_enabled: false });
  manifest('acme_bad', { required: true, default_enabled: false });
}

describe.each(DIALECTS)('per-organization enablement (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-enablement-');
  let orgB: number;
  /** Org admin of organization B (org.admin through a group there), a member of B only. */
  let bAdmin: { token: string };
  const inOrg = (orgId: number, more: Record<string, unknown> = {}) => ({ ...more, headers: { 'X-Org-Id': String(orgId) } });
  const setting = (id: string, orgId: number, enabled: boolean, token?: string) =>
    t.request('PUT', `/api/plugins/${id}/organizations/${orgId}`, { token, body: { enabled }, headers: { 'X-Org-Id': String(orgId) } });
  const typesIn = async (orgId: number) => (await t.request('GET', '/api/connectors/types', inOrg(orgId))).body.map((type: { type: string }) => type.type);

  beforeAll(async () => {
    writeThirdPartyPlugin(folder.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), path.join(folder.dir, 'manifests')] });
    const bee = await t.outsider('bee');
    orgB = bee.orgId;
    const group = await t.request('POST', '/api/groups', inOrg(orgB, { body: { name: 'b admins', capabilities: ['org.admin'] } }));
    expect(group.status, group.text).toBe(201);
    expect((await t.request('POST', `/api/groups/${group.body.id}/members`, inOrg(orgB, { body: { user_id: bee.userId } }))).status).toBe(201);
    bAdmin = { token: bee.token };
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  it('refuses a required plugin that is off by default', async () => {
    const bad = (await t.request('GET', '/api/plugins/acme_bad')).body;
    expect(bad).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_MANIFEST' });
    expect(bad.reason).toMatch(/field default_enabled: a required plugin serves every organization/);
  });

  it('serves every organization by default and says so', async () => {
    for (const orgId of [1, orgB]) {
      const res = await t.request('GET', `/api/plugins/acme_notes/organizations/${orgId}`, inOrg(orgId));
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ plugin_id: 'acme_notes', org_id: orgId, enabled: true, default_enabled: true, required: false, updated_at: null });
      expect((await t.request('POST', '/api/acme-notes', inOrg(orgId, { body: { text: `note of ${orgId}` } }))).status).toBe(201);
    }
    expect(await typesIn(1)).toContain('acme_notes_echo');
  });

  it('disabled for one organization only: its routes answer 404 there, as a path nobody serves, and work in another', async () => {
    const off = await setting('acme_notes', 1, false);
    expect(off.status, off.text).toBe(200);
    expect(off.body).toMatchObject({ plugin_id: 'acme_notes', org_id: 1, enabled: false, default_enabled: true, updated_at: expect.any(String) });

    const existing = await t.request('GET', '/api/acme-notes/1', inOrg(1));
    const missing = await t.request('GET', '/api/acme-notes/999', inOrg(1));
    const nowhere = await t.request('GET', '/api/no-such-plugin/1', inOrg(1));
    for (const res of [existing, missing, nowhere]) {
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
    // Nothing tells a note that exists from one that does not, or from a route nobody serves.
    expect(existing.body.detail).toBe('no route GET /api/acme-notes/1');
    expect(missing.body.detail).toBe('no route GET /api/acme-notes/999');
    expect(nowhere.body.detail).toBe('no route GET /api/no-such-plugin/1');
    expect((await t.request('GET', '/api/acme-notes', inOrg(1))).status).toBe(404);
    expect((await t.request('POST', '/api/acme-notes', inOrg(1, { body: { text: 'refused' } }))).status).toBe(404);

    // Organization B is served as before, its data whole.
    expect((await t.request('GET', '/api/acme-notes', inOrg(orgB))).body).toEqual([`note of ${orgB}`]);
    expect((await t.request('GET', '/api/acme-notes/1', { token: bAdmin.token })).body).toEqual({ text: `note of ${orgB}` });
    // The plugin stays loaded; routes that are not org-scoped keep answering in organization 1.
    expect((await t.request('GET', '/api/plugins/acme_notes', inOrg(1))).body).toMatchObject({ state: 'loaded' });

    // On again: organization 1's notes are back.
    expect((await setting('acme_notes', 1, true)).body).toMatchObject({ enabled: true });
    expect((await t.request('GET', '/api/acme-notes', inOrg(1))).body).toEqual(['note of 1']);
  });

  it('does not offer its connector type in an organization it is disabled for: not listed, and creating one is refused as an unknown type', async () => {
    expect((await setting('acme_notes', 1, false)).status).toBe(200);
    try {
      expect(await typesIn(1)).not.toContain('acme_notes_echo');
      expect(await typesIn(1)).toContain('workflow_webhook');
      expect(await typesIn(orgB)).toContain('acme_notes_echo');
      const refused = await t.request('POST', '/api/connectors', inOrg(1, { body: { name: 'echoer', type: 'acme_notes_echo', config: {} } }));
      const unknown = await t.request('POST', '/api/connectors', inOrg(1, { body: { name: 'echoer', type: 'never_heard_of', config: {} } }));
      expect(refused.status).toBe(400);
      expect(unknown.status).toBe(400);
      expect(refused.body.detail).toBe(unknown.body.detail.replace('never_heard_of', 'acme_notes_echo'));
      const created = await t.request('POST', '/api/connectors', { token: bAdmin.token, body: { name: 'echoer', type: 'acme_notes_echo', config: {} } });
      expect(created.status, created.text).toBe(201);
      expect((await t.request('POST', `/api/connectors/${created.body.id}/actions/echo`, { token: bAdmin.token, body: { hi: 1 } })).body).toEqual({ result: { hi: 1 } });
    } finally {
      await setting('acme_notes', 1, true);
    }
  });

  it('keeps a connector of a type disabled later from running in that organization', async () => {
    const created = await t.request('POST', '/api/connectors', { token: bAdmin.token, body: { name: 'echo later', type: 'acme_notes_echo', config: {} } });
    expect(created.status, created.text).toBe(201);
    expect((await setting('acme_notes', orgB, false, bAdmin.token)).status).toBe(200);
    try {
      const run = await t.request('POST', `/api/connectors/${created.body.id}/actions/echo`, { token: bAdmin.token, body: { hi: 2 } });
      expect(run.status).toBe(409);
      expect(run.body.detail).toMatch(/connector type "acme_notes_echo" is not offered here/);
    } finally {
      expect((await setting('acme_notes', orgB, true, bAdmin.token)).status).toBe(200);
    }
  });

  it('keeps a plugin whose manifest says default_enabled: false off until an organization turns it on', async () => {
    expect((await t.request('GET', '/api/plugins/acme_beta')).body).toMatchObject({ state: 'loaded' });
    expect((await t.request('GET', '/api/plugins/acme_beta/organizations/1')).body).toMatchObject({ enabled: false, default_enabled: false, updated_at: null });
    expect((await t.request('GET', '/api/acme-beta', inOrg(1))).status).toBe(404);
    expect(await typesIn(1)).not.toContain('acme_beta_echo');

    expect((await setting('acme_beta', 1, true)).body).toMatchObject({ enabled: true, default_enabled: false });
    expect((await t.request('GET', '/api/acme-beta', inOrg(1))).status).toBe(200);
    expect(await typesIn(1)).toContain('acme_beta_echo');
    expect((await t.request('GET', '/api/acme-beta', { token: bAdmin.token })).status).toBe(404);
    expect(await typesIn(orgB)).not.toContain('acme_beta_echo');

  });

  it('lets an org admin switch their own organization only, a platform admin any; a required plugin cannot be disabled (409)', async () => {
    // B's org admin, in B.
    const own = await setting('acme_notes', orgB, false, bAdmin.token);
    expect(own.status, own.text).toBe(200);
    expect((await t.request('GET', '/api/acme-notes', { token: bAdmin.token })).status).toBe(404);
    expect((await setting('acme_notes', orgB, true, bAdmin.token)).status).toBe(200);
    // Organization 1 from B: as if it did not exist, whether named in the path only or entered.
    const foreign = await t.request('PUT', '/api/plugins/acme_notes/organizations/1', { token: bAdmin.token, body: { enabled: false } });
    expect(foreign.status).toBe(404);
    expect(foreign.body.detail).toMatch(/no organization 1 among yours/);
    expect((await t.request('PUT', '/api/plugins/acme_notes/organizations/1', { token: bAdmin.token, body: { enabled: false }, headers: { 'X-Org-Id': '1' } })).status).toBe(403);
    expect((await t.request('GET', '/api/plugins/acme_notes/organizations/1', { token: bAdmin.token })).status).toBe(404);
    expect((await t.request('GET', '/api/acme-notes', inOrg(1))).status).toBe(200);

    // A member without org.admin reads the switch but may not turn it.
    const viewer = await t.userToken('viewer');
    expect((await t.request('GET', '/api/plugins/acme_notes/organizations/1', { token: viewer.token })).body).toMatchObject({ enabled: true });
    const denied = await setting('acme_notes', 1, false, viewer.token);
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toMatch(/org\.admin/);

    // A platform admin reaches any organization from its own; one that does not exist is 404.
    const fromOne = await t.request('PUT', `/api/plugins/acme_notes/organizations/${orgB}`, { body: { enabled: true } });
    expect(fromOne.status, fromOne.text).toBe(200);
    expect((await t.request('PUT', '/api/plugins/acme_notes/organizations/999999', { body: { enabled: false } })).status).toBe(404);

    const required = await setting('plugins', 1, false);
    expect(required.status).toBe(409);
    expect(required.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(required.body.detail).toBe('plugin "plugins" is required: it serves every organization and cannot be disabled for one');
    expect((await t.request('GET', '/api/plugins/plugins/organizations/1')).body).toMatchObject({ enabled: true, required: true });
    expect((await setting('no_such_plugin', 1, false)).status).toBe(404);
    const malformed = await t.request('PUT', '/api/plugins/acme_notes/organizations/1', { body: { enabled: 'no' } });
    expect(malformed.status).toBe(400);
    expect(malformed.body.errors).toEqual([expect.objectContaining({ path: 'body.enabled' })]);
  });

  it('audits every switch with the organization, the actor and the change', async () => {
    expect((await setting('acme_notes', orgB, false, bAdmin.token)).status).toBe(200);
    expect((await setting('acme_notes', orgB, true, bAdmin.token)).status).toBe(200);
    const log = await t.request('GET', '/api/audit?action=plugin.organization.update', { token: bAdmin.token });
    expect(log.status, log.text).toBe(200);
    const [latest, previous] = log.body.items;
    expect(latest).toMatchObject({ actor_username: 'bee', org_id: orgB, target_type: 'plugin', target_id: 'acme_notes', outcome: 'success', details: { enabled: true, was_enabled: false } });
    expect(previous).toMatchObject({ org_id: orgB, details: { enabled: false, was_enabled: true } });
    // Organization 1's switches are not B's to read.
    expect(log.body.items.every((item: { org_id: number }) => item.org_id === orgB)).toBe(true);
  });

  it('holds on another instance from its next request', async () => {
    const peer = await t.peer();
    expect((await peer.request('GET', '/api/acme-notes', inOrg(1))).status).toBe(200);
    expect((await setting('acme_notes', 1, false)).status).toBe(200);
    expect((await peer.request('GET', '/api/acme-notes', inOrg(1))).status).toBe(404);
    expect((await peer.request('GET', '/api/acme-notes', { token: bAdmin.token })).status).toBe(200);
    // And back, switched on the peer, seen here.
    expect((await peer.request('PUT', '/api/plugins/acme_notes/organizations/1', { body: { enabled: true } })).status).toBe(200);
    expect((await t.request('GET', '/api/acme-notes', inOrg(1))).status).toBe(200);
  });

  it('forgets an organization\u2019s switches with the organization', async () => {
    const org = await t.request('POST', '/api/organizations', { body: { name: 'short-lived' } });
    expect((await setting('acme_notes', org.body.id, false)).status).toBe(200);
    const rows = () => t.kernel.storage.db.selectFrom('plugin_organizations').select('plugin_id').where('org_id', '=', org.body.id).execute();
    expect(await rows()).toHaveLength(1);
    await t.kernel.storage.db.deleteFrom('organizations').where('id', '=', org.body.id).execute();
    expect(await rows()).toEqual([]);
  });
});
