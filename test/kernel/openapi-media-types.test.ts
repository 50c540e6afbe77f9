import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AnswerChecker } from '../harness/answer-check.ts';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, type TestKernel } from '../harness/index.ts';

/** What the document says of the datasets routes a generated client most often gets wrong: several media types, the rows query language, value shapes. */
describe.each(DIALECTS)('OpenAPI media types and value shapes (%s)', (dialect) => {
  let t: TestKernel;
  let doc: Record<string, any>;
  let checker: AnswerChecker;
  let datasetId: number;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    doc = (await t.request('GET', '/openapi.json', { token: null })).body;
    checker = new AnswerChecker(doc as never);
    const project = await t.request('POST', '/api/projects', { body: { key: 'MEDIA', name: 'Media' } });
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'cities', project_id: project.body.id } });
    datasetId = dataset.body.id;
    const load = await t.request('POST', `/api/datasets/${datasetId}/data`, { body: 'city,amount,ok\nLyon,1.5,true\nParis,,false\n', headers: { 'content-type': 'text/csv' } });
    expect(load.status).toBe(200);
  });
  afterAll(async () => t?.stop());

  it('declares each upload media type with its own schema: the CSV as binary, a form with its file field and encoding', () => {
    const upload = doc.paths['/api/datasets/{id}/data'].post;
    const content = upload.requestBody.content;
    expect(Object.keys(content).sort()).toEqual(['application/csv', 'multipart/form-data', 'text/csv']);
    expect(content['text/csv'].schema).toMatchObject({ type: 'string', format: 'binary' });
    expect(content['multipart/form-data'].schema).toMatchObject({ type: 'object', required: ['file'], properties: { file: { type: 'string', format: 'binary' } } });
    expect(content['multipart/form-data'].encoding.file.contentType).toMatch(/text\/csv/);
    const mode = upload.parameters.find((p: { name: string }) => p.name === 'mode');
    expect(mode.schema.default).toBe('append');
    expect(mode.description).toMatch(/append.*default/);
  });

  it('declares the CSV and the JSON export, and a real JSON export validates against its declared schema', async () => {
    const content = doc.paths['/api/datasets/{id}/export'].get.responses['200'].content;
    expect(content['text/csv'].schema).toMatchObject({ type: 'string' });
    expect(content['application/json'].schema).toBeDefined();
    const json = await t.request('GET', `/api/datasets/${datasetId}/export?format=json`);
    expect(json.body).toEqual([
      { city: 'Lyon', amount: 1.5, ok: true },
      { city: 'Paris', amount: null, ok: false },
    ]);
    const path = `/api/datasets/${datasetId}/export?format=json`;
    expect(checker.problem('GET', path, 200, json.headers.get('content-type'), json.body, json.text)).toBeUndefined();
    // The check is real: a body the schema does not describe fails it.
    expect(checker.problem('GET', path, 200, 'application/json', [{ city: { nested: true }, extra: [1] }, 'not a row'], '[]')).toMatch(/breaks its declared schema/);
    const csv = await t.request('GET', `/api/datasets/${datasetId}/export`);
    expect(checker.problem('GET', path, 200, csv.headers.get('content-type'), csv.body, csv.text)).toBeUndefined();
  });

  it('describes every parameter of the rows query language with an example', () => {
    const parameters: { name: string; in: string; description?: string; schema: Record<string, unknown> }[] = doc.paths['/api/datasets/{id}/rows'].get.parameters;
    for (const name of ['filter', 'sort', 'columns', 'cursor', 'limit']) {
      const parameter = parameters.find((p) => p.name === name && p.in === 'query');
      expect(parameter?.description, name).toBeTruthy();
      expect(parameter?.schema.example, name).toBeDefined();
    }
    expect(parameters.find((p) => p.name === 'filter')?.description).toMatch(/column:operator:value/);
  });

  it('types profile values, governed-SQL rows and the contract record instead of leaving them unknown', () => {
    const schemas = doc.components.schemas;
    const profile = schemas.ColumnProfile.properties;
    for (const field of ['min', 'max']) expect(profile[field].anyOf ?? profile[field].type, field).toBeDefined();
    expect(profile.type.enum).toContain('integer');
    expect(profile.top_values.items.properties.value).toEqual({ $ref: '#/components/schemas/DataValue' });
    expect(schemas.SqlResult.properties.rows.items.items).toEqual({ $ref: '#/components/schemas/DataValue' });
    expect(schemas.DataValue.anyOf.map((s: { type: string }) => s.type)).toEqual(['string', 'number', 'boolean', 'null', 'array', 'object']);
    expect(schemas.SchemaContract.required).toContain('org_id');
  });
});
