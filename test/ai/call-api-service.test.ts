import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { expectProblem } from '../harness/answers.ts';
import { startOpenAiServer, type LlmServer } from '../harness/llm-servers.ts';
import { byRegionSql, customersFixture } from '../serving/customers-fixture.ts';

const SERVICES = '/api/publishing/api-services';
const CUSTOMERS = [
  { id: 1, region: 'EU', name: 'Ada', email: 'ada@example.com' },
  { id: 2, region: 'US', name: 'Bob', email: 'bob@example.com' },
  { id: 3, region: 'EU', name: 'Cy', email: 'cy@example.com' },
];

/** Issue 19, the agent tool `call_api_service`: a published service's endpoint as the user, its input checked against the service's OpenAPI description. */
describe.each(DIALECTS)('the agent tool call_api_service (%s)', (dialect) => {
  let t: TestKernel;
  let openai: LlmServer;
  let projectId: number;
  let customersId: number;
  let serviceId: number;

  const expectDetail = (res: { status: number; text: string; body: any }, status: number, detail: RegExp) => {
    expectProblem(res as never, status);
    expect(res.body.detail).toMatch(detail);
  };
  const invoke = (args: unknown, token?: string) => t.request('POST', '/api/agent-tools/call_api_service/invoke', { body: { arguments: args }, token });

  beforeAll(async () => {
    openai = await startOpenAiServer();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' } });
    ({ projectId, customersId } = await customersFixture(t, 'CALLS', CUSTOMERS));
    const endpoints = [
      byRegionSql('id, name, email'),
      { name: 'by-id', kind: 'lookup', config: { dataset_id: customersId, keys: ['id'], columns: ['id', 'name', 'email'] } },
      { name: 'later', kind: 'function', config: {} },
    ];
    const created = await t.request('POST', SERVICES, { body: { project_id: projectId, name: 'Customers', key: 'customers', endpoints } });
    expect(created.status, created.text).toBe(201);
    serviceId = created.body.id;
  });
  afterAll(async () => {
    await t?.stop();
    await openai?.close();
  });

  it('reaches only published services: a draft, and an unpublished one, are not there', async () => {
    expectDetail(await invoke({ service: 'customers', endpoint: 'by-region', input: { region: 'EU' } }), 404, /no published API Service "customers"/);
    expect((await t.request('POST', `${SERVICES}/${serviceId}/publish`)).status).toBe(200);
    expect((await invoke({ service: 'customers', endpoint: 'by-region', input: { region: 'EU' } })).status).toBe(200);
    expect((await t.request('POST', `${SERVICES}/${serviceId}/unpublish`)).status).toBe(200);
    expectProblem(await invoke({ service: 'customers', endpoint: 'by-region', input: { region: 'EU' } }), 404);
    expect((await t.request('POST', `${SERVICES}/${serviceId}/publish`)).status).toBe(200);
  });

  it('runs sql and lookup endpoints with the caller\u2019s rights: PII masked for whoever may not read it', async () => {
    const admin = await invoke({ service: 'customers', endpoint: 'by-region', input: { region: 'EU' } });
    expect(admin.status, admin.text).toBe(200);
    expect(admin.body.result.rows).toEqual([
      { id: 1, name: 'Ada', email: '***' },
      { id: 3, name: 'Cy', email: '***' },
    ]);
    const editor = await t.userToken('editor', `api-caller-${dialect}`);
    const one = await invoke({ service: 'customers', endpoint: 'by-id', input: { id: 2 } }, editor.token);
    expect(one.status, one.text).toBe(200);
    expect(one.body.result).toEqual({ key: { id: 2 }, rows: [{ id: 2, name: 'Bob', email: '***' }] });
    const batch = await invoke({ service: 'customers', endpoint: 'by-id', input: { keys: [{ id: 3 }, { id: 99 }, { id: 1 }] } }, editor.token);
    expect(batch.body.result.results.map((r: any) => r.rows.map((row: any) => row.name))).toEqual([['Cy'], [], ['Ada']]);
    // The caller's row policies apply, not the publisher's.
    const group = await t.request('POST', '/api/groups', { body: { name: `us-only-${dialect}`, capabilities: [] } });
    expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: editor.id } })).status).toBe(201);
    expect((await t.request('POST', `/api/datasets/${customersId}/row-policies`, { body: { group_id: group.body.id, filters: ['region:eq:US'] } })).status).toBe(201);
    expect((await invoke({ service: 'customers', endpoint: 'by-region', input: { region: 'EU' } }, editor.token)).body.result.rows).toEqual([]);
    expect((await invoke({ service: 'customers', endpoint: 'by-region', input: { region: 'EU' } })).body.result.rows).toHaveLength(2);
  });

  it('checks the input against the endpoint\u2019s OpenAPI description, naming each field', async () => {
    const call = (endpoint: string, input: unknown) => invoke({ service: 'customers', endpoint, input });
    expectProblem(await call('by-region', {}), 400, 'body.arguments.input.region');
    expectProblem(await call('by-region', { region: 'EU', min_id: 'one' }), 400, 'body.arguments.input.min_id');
    expectProblem(await call('by-region', { region: 'EU', "x'; drop table customers; --": 1 }), 400, "body.arguments.input.x'; drop table customers; --");
    expectProblem(await call('by-region', { region: 7 }), 400, 'body.arguments.input.region');
    expectProblem(await call('by-id', { id: 'two' }), 400, 'body.arguments.input');
    expectProblem(await call('by-id', { keys: [] }), 400, 'body.arguments.input');
    expectProblem(await invoke({ service: 'customers', endpoint: 'by-region', input: 'region=EU' }), 400, 'body.arguments.input');
    // Hostile values are bound, never spliced: they match nothing.
    for (const region of ["EU' or '1'='1", 'EU" -- ', 'EU/* */', 'x'.repeat(10_000)]) {
      const res = await call('by-region', { region });
      expect(res.status, res.text).toBe(200);
      expect(res.body.result.rows).toEqual([]);
    }
    expectProblem(await call('by-region', { region: 'x'.repeat(10_001) }), 400, 'body.arguments.input.region');
    expectProblem(await call('by-region', { region: 'EU\u0000' }), 400, 'body.arguments.input.region');
    expectProblem(await call('by-id', { keys: [{ id: 1 }, { id: 'x' }] }), 400, 'body.arguments.input.keys.1.id');
    // Past the description, the endpoint's own checks name the input where the caller put it too.
    expectProblem(await call('by-region', { region: 'EU', min_id: 1e20 }), 400, 'body.arguments.input.min_id');
    expectDetail(await call('nowhere', {}), 404, /no endpoint "nowhere" \(its endpoints: by-region, by-id, later\)/);
    expectProblem(await call('later', {}), 501);
    expectProblem(await invoke({ service: "customers'--", endpoint: 'by-region', input: { region: 'EU' } }), 404);
  });

  it('never reaches another organization\u2019s services', async () => {
    const outsider = await t.outsider(`call-outsider-${dialect}`);
    expectProblem(await invoke({ service: 'customers', endpoint: 'by-region', input: { region: 'EU' } }, outsider.token), 404);
  });

  it('is called by the assistant in a chat, its answer fed back to the model', async () => {
    const connection = await t.request('POST', '/api/llm-mesh/connections', { body: { name: 'caller-model', provider: 'openai_compatible', config: { base_url: `${openai.url}/v1`, default_model: 'gpt-test' } } });
    const created = await t.request('POST', '/api/chat/conversations', { body: { connection_id: connection.body.id, tools: ['call_api_service'] } });
    expect(created.status, created.text).toBe(201);
    openai.script.push({ tool_calls: [{ name: 'call_api_service', arguments: { service: 'customers', endpoint: 'by-id', input: { id: 1 } } }] }, { text: 'Customer 1 is Ada.' });
    const res = await t.request('POST', `/api/chat/conversations/${created.body.id}/messages`, { body: { content: 'Who is customer 1?' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.tool_calls).toEqual([expect.objectContaining({ name: 'call_api_service', result: { key: { id: 1 }, rows: [{ id: 1, name: 'Ada', email: '***' }] } })]);
    const fedBack = openai.requests.at(-1)!.body.messages.at(-1);
    expect(fedBack).toMatchObject({ role: 'tool', content: JSON.stringify({ key: { id: 1 }, rows: [{ id: 1, name: 'Ada', email: '***' }] }) });
    expect(res.body.message.content).toBe('Customer 1 is Ada.');
  });
});
