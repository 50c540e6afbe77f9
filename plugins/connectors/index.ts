import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import {
  definePlugin,
  defineRoute,
  HttpProblem,
  identitySchemas as s,
  kernelServices,
  OutboundFailedError,
  OutboundRefusedError,
  problems,
  reply,
  fieldErrorsOf,
} from '../../kernel/plugin-api.ts';
import { ConnectorStore, SECRET_MASK, type ConnectorRow } from './connector-store.ts';
import { connectorMigrations } from './migrations.ts';
import { connectorActions, connectorTypes, REMOTE_CALL_FAILED, type ConnectorActions, type ConnectorType } from './public.ts';

const connectorSchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    name: z.string(),
    type: z.string(),
    config: z.record(z.string(), z.unknown()).describe(`Secret fields answer ${SECRET_MASK}`),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Connector' });

/** A 400 when a target field changes while secrets were sent back as the mask (see `ConnectorType.targetFields`). */
function refuseMaskedSecretsOnRetarget(type: ConnectorType, config: Record<string, unknown>, previous: Record<string, unknown>, masked: string[]) {
  const moved = type.targetFields.filter((k) => !isDeepStrictEqual(config[k], previous[k]));
  if (!moved.length) return;
  throw problems.badRequest(
    `changing ${moved.map((k) => `config.${k}`).join(', ')} changes where the connector connects: give ${masked.map((k) => `config.${k}`).join(', ')} again instead of ${SECRET_MASK}`,
    masked.map((k) => ({ path: `body.config.${k}`, message: 'give this secret again: the connector\u2019s target changes' })),
  );
}

const typeSchema = z
  .object({
    type: z.string(),
    description: z.string(),
    plugin_id: z.string(),
    config_schema: z.record(z.string(), z.unknown()),
    secret_fields: z.array(z.string()),
    target_fields: z.array(z.string()).describe('Fields naming where the connector connects: changing one requires giving the secrets again'),
    actions: z.array(z.object({ name: z.string(), description: z.string(), args_schema: z.record(z.string(), z.unknown()) })),
  })
  .meta({ id: 'ConnectorType' });

/** The `connectors` router: connectors of the organization, and the connector types plugins contribute. */
export default definePlugin({
  deps: { storage: kernelServices.storage, vault: kernelServices.vault, enablement: kernelServices.pluginEnablement },
  migrations: connectorMigrations,
  init: ({ storage, vault, enablement }, ctx) => {
    const types = new Map<string, { value: ConnectorType; pluginId: string }>();
    ctx.provideExtensionPoint(connectorTypes, ({ value, pluginId }) => {
      const entry = { value, pluginId };
      types.set(value.type, entry);
      return () => {
        if (types.get(value.type) === entry) types.delete(value.type);
      };
    });
    const store = new ConnectorStore(storage, vault);
    const answer = (row: ConnectorRow) => ({ id: row.id, org_id: row.org_id, name: row.name, type: row.type, config: store.mask(row.config), created_at: row.created_at, updated_at: row.updated_at });
    /** The types offered in the organization: a type whose plugin is disabled there is as if it were not loaded. */
    const offeredIn = async (orgId: number) => {
      const all = [...types.values()];
      const enabled = await Promise.all(all.map(({ pluginId }) => enablement.isEnabled(pluginId, orgId)));
      return all.filter((_, i) => enabled[i]);
    };
    const offeredType = async (orgId: number, name: string) => {
      const entry = types.get(name);
      return entry && (await enablement.isEnabled(entry.pluginId, orgId)) ? entry.value : undefined;
    };
    const typeOf = async (row: ConnectorRow) => {
      const type = await offeredType(row.org_id, row.type);
      if (!type) throw problems.conflict(`connector type "${row.type}" is not offered here: its plugin is not loaded on this server or is disabled for this organization`);
      return type;
    };
    /**
     * Validates a config. On update, a secret sent back as the mask keeps its stored value, unless
     * the update also changes a target field (where the connector connects): then the stored
     * secret would be sent to the new target, so it must be given again.
     */
    const validConfig = (type: ConnectorType, config: Record<string, unknown>, previous?: Record<string, unknown>) => {
      const masked = previous ? Object.keys(config).filter((k) => config[k] === SECRET_MASK && Object.hasOwn(previous, k) && previous[k] !== undefined) : [];
      const merged = { ...config, ...Object.fromEntries(masked.map((k) => [k, previous![k]])) };
      const parsed = type.config.safeParse(store.open(merged));
      if (!parsed.success) throw problems.badRequest(`invalid config for ${type.type}: ${parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`, fieldErrorsOf(parsed.error.issues, 'body.config'));
      const data = parsed.data as Record<string, unknown>;
      if (masked.length) refuseMaskedSecretsOnRetarget(type, data, store.open(previous!), masked);
      return store.seal(data, type.secretFields);
    };
    const actions: ConnectorActions = {
      async run(orgId, connectorId, name, input, principal, audit, location = 'body') {
        const row = await store.get(orgId, connectorId);
        const type = await typeOf(row);
        // Own actions only: `__proto__`, `constructor` or `toString` name no action of the type.
        const action = Object.hasOwn(type.actions, name) ? type.actions[name] : undefined;
        if (!action) throw problems.notFound(`connector type ${type.type} has no action "${name}" (it has: ${Object.keys(type.actions).join(', ')})`);
        const args = action.args.safeParse(input);
        if (!args.success) throw problems.badRequest(`invalid arguments for ${name}`, fieldErrorsOf(args.error.issues, location));
        let result;
        try {
          result = await action.run({ config: store.open(row.config), args: args.data, orgId, principal, audit });
        } catch (err) {
          await audit.record({ action: 'connector.action', outcome: 'failure', targetType: 'connector', targetId: row.id, details: { action: name, reason: (err as Error).message } });
          if (err instanceof OutboundRefusedError) throw problems.unprocessable(err.message);
          if (err instanceof OutboundFailedError) throw new HttpProblem(502, err.message);
          throw err;
        }
        const failed = result.status !== undefined && result.status >= 400;
        await audit.record({ action: 'connector.action', outcome: failed ? 'failure' : 'success', targetType: 'connector', targetId: row.id, details: { action: name, remote_status: result.status ?? null } });
        if (failed) throw new HttpProblem(result.status!, `the ${type.type} peer answered ${result.status}`, { title: REMOTE_CALL_FAILED });
        return result;
      },
      async ofType(orgId, type) {
        return (await store.list(orgId)).filter((row) => row.type === type).map((row) => ({ id: row.id, name: row.name }));
      },
    };
    ctx.provideService(connectorActions, actions);
    const base = { security: 'bearer', orgScoped: true } as const;
    const idParams = s.idParam('id');

    return {
      routes: [
        defineRoute({
          ...base,
          method: 'get',
          path: '/types',
          summary: 'Connector types of the loaded connector plugins, with their config and action schemas',
          description:
            'Each type a loaded connector plugin offers, with the JSON Schema of its config and of each action\'s arguments: what POST /api/connectors and the action route accept. Only types of plugins enabled in the current organization.',
          capability: 'connectors.read',
          responses: { 200: { description: 'Types', schema: z.array(typeSchema) } },
          handler: async ({ orgId }) =>
            (await offeredIn(orgId))
              .map(({ value, pluginId }) => ({
                type: value.type,
                description: value.description,
                plugin_id: pluginId,
                config_schema: z.toJSONSchema(value.config) as Record<string, unknown>,
                secret_fields: value.secretFields,
                target_fields: value.targetFields,
                actions: Object.entries(value.actions).map(([name, action]) => ({ name, description: action.description, args_schema: z.toJSONSchema(action.args) as Record<string, unknown> })),
              }))
              .sort((a, b) => a.type.localeCompare(b.type)),
        }),
        defineRoute({
          ...base,
          method: 'post',
          path: '',
          summary: 'Create a connector (secrets in its config are encrypted at rest and never answered)',
          description:
            'The config is checked against its type\'s schema (400 naming each field); an unknown type is a 400; names are unique in the organization (409). Secret fields are encrypted at rest and answered masked, never in clear.',
          capability: 'connectors.manage',
          request: { body: z.object({ name: z.string().trim().min(1).max(200), type: z.string().min(1), config: z.record(z.string(), z.unknown()) }) },
          responses: { 201: { description: 'The connector', schema: connectorSchema }, 409: { description: 'A connector with this name already exists in the organization' } },
          handler: async ({ body, orgId, principal, audit }) => {
            const type = await offeredType(orgId, body.type);
            if (!type) throw problems.badRequest(`unknown connector type "${body.type}" (GET /api/connectors/types lists them)`, [{ path: 'body.type', message: 'unknown type' }]);
            const row = await store.create(orgId, { name: body.name, type: body.type, config: validConfig(type, body.config) }, principal.userId);
            await audit.record({ action: 'connector.create', targetType: 'connector', targetId: row.id, details: { name: row.name, type: row.type, config: store.mask(row.config) } });
            return reply(201, answer(row));
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '',
          summary: 'Connectors of the current organization',
          description:
            'Every connector of the current organization, its secrets masked.',
          capability: 'connectors.read',
          responses: { 200: { description: 'Connectors', schema: z.array(connectorSchema) } },
          handler: async ({ orgId }) => (await store.list(orgId)).map(answer),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/{id}',
          summary: 'One connector',
          description:
            'A connector of the current organization with its config, secrets masked. A connector of another organization is a 404.',
          capability: 'connectors.read',
          request: { params: idParams },
          responses: { 200: { description: 'The connector', schema: connectorSchema } },
          handler: async ({ params, orgId }) => answer(await store.get(orgId, params.id)),
        }),
        defineRoute({
          ...base,
          method: 'patch',
          path: '/{id}',
          summary: 'Rename a connector or replace its config (a secret sent back as the mask is kept, unless a target field such as a URL or host changes: then secrets must be given again)',
          description:
            'A new config is checked against the type\'s schema (400). Sending a secret back as its mask keeps the stored secret, unless a field that says where the secret goes (a URL, a host) changes: then every secret must be given again. A connector whose type\'s plugin is no longer offered here is a 409.',
          capability: 'connectors.manage',
          request: {
            params: idParams,
            body: z
              .object({ name: z.string().trim().min(1).max(200).optional(), config: z.record(z.string(), z.unknown()).optional() })
              .refine((b) => Object.keys(b).length > 0, 'give at least one field to change'),
          },
          responses: { 200: { description: 'The connector', schema: connectorSchema }, 409: { description: 'A connector with this name already exists, or the type of the connector is no longer offered here (its plugin is not loaded or is disabled)' } },
          handler: async ({ params, body, orgId, audit }) => {
            const row = await store.get(orgId, params.id);
            const config = body.config ? validConfig(await typeOf(row), body.config, row.config) : undefined;
            const updated = await store.update(orgId, row.id, { name: body.name, config });
            await audit.record({ action: 'connector.update', targetType: 'connector', targetId: row.id, details: { changes: Object.keys(body), config: store.mask(updated.config) } });
            return answer(updated);
          },
        }),
        defineRoute({
          ...base,
          method: 'delete',
          path: '/{id}',
          summary: 'Delete a connector',
          description:
            'Deletes the connector and its encrypted secrets. Cannot be undone.',
          capability: 'connectors.manage',
          request: { params: idParams },
          responses: { 204: { description: 'Deleted' } },
          handler: async ({ params, orgId, audit }) => {
            await store.remove(orgId, params.id);
            await audit.record({ action: 'connector.delete', targetType: 'connector', targetId: params.id });
            return reply(204);
          },
        }),
        defineRoute({
          ...base,
          method: 'post',
          path: '/{id}/test',
          summary: 'Check that the connector\u2019s peer answers',
          description:
            'Asks the connector\'s type to reach its peer with the stored config and answers whether it worked and why not, as `ok` and `message`: a failed check is a 200 with `ok: false`, not an error.',
          capability: 'connectors.use',
          request: { params: idParams },
          responses: { 200: { description: 'The outcome', schema: z.object({ ok: z.boolean(), message: z.string() }) }, 409: { description: 'The type of the connector is no longer offered here (its plugin is not loaded or is disabled)' } },
          handler: async ({ params, orgId }) => {
            const row = await store.get(orgId, params.id);
            const type = await typeOf(row);
            if (!type.test) return { ok: true, message: `${type.type} has nothing to test` };
            try {
              return await type.test(store.open(row.config));
            } catch (err) {
              if (err instanceof OutboundRefusedError || err instanceof OutboundFailedError) return { ok: false, message: err.message };
              throw err;
            }
          },
        }),
        defineRoute({
          ...base,
          method: 'post',
          path: '/{id}/actions/{action}',
          summary: 'Run an action of a connector (e.g. send_message); a failed remote call answers the remote status, without retry',
          description:
            'Runs one of the type\'s actions (GET /api/connectors/types lists them; an unknown action is a 404) with arguments checked against its schema (400). The call is made once, without retry: a peer\'s error answer is passed on with the peer\'s status, a peer that cannot be reached is a 502, and a destination the outbound policy refuses is a 422.',
          capability: 'connectors.use',
          request: { params: z.object({ id: s.pathId, action: z.string().min(1) }), body: z.record(z.string(), z.unknown()) },
          responses: { 200: { description: 'What the peer answered', schema: z.object({ result: z.unknown() }) }, 409: { description: 'The type of the connector is no longer offered here (its plugin is not loaded or is disabled)' }, 422: { description: 'The action refused the call (e.g. an outbound address that is not allowed, or an import the source or dataset refuses)' }, 502: { description: 'The peer could not be reached or failed; an error status of the peer is passed on as the status of this answer' } },
          handler: async ({ params, body, orgId, principal, audit }) => ({ result: (await actions.run(orgId, params.id, params.action, body, principal, audit)).body }),
        }),
      ],
    };
  },
});
