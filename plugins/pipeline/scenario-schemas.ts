import { identitySchemas as s, z } from '../../kernel/plugin-api.ts';

const noControl = (max: number) => z.string().trim().min(1).max(max).regex(/^[^\u0000-\u001f]*$/, 'must not hold control characters');
const id = s.recordId;

export const scenarioStep = z
  .object({
    type: z.string().min(1).max(100).describe('A step type offered here (GET /api/pipeline/step-types)'),
    name: s.displayName.optional().describe('Defaults to the type'),
    params: z.record(z.string(), z.unknown()).default({}).describe("The step type's parameters, valid against its JSON Schema"),
    continue_on_failure: z.boolean().default(false).describe('When the step fails, the later steps still run (and the scenario does not fail for it)'),
  })
  .strict();

export const scenarioTrigger = z.discriminatedUnion('type', [
  z.object({ type: z.literal('manual') }).strict().describe('Started from the API by a user (POST …/run): always possible, listed for the record'),
  z.object({ type: z.literal('api') }).strict().describe('Started from the API by a program: always possible, listed for the record'),
  z
    .object({
      type: z.literal('dataset_changed'),
      datasets: z.array(id).min(1).max(100).describe('Dataset ids whose change (rows written, schema replaced) starts the scenario'),
      debounce_s: z.number().int().min(0).max(86_400).default(60).describe('Changes within this many seconds of the first one start one run, after the window'),
    })
    .strict(),
]);

export const scenarioReporter = z
  .object({
    on: z.enum(['failure', 'success', 'always']),
    connector_id: id.describe('A connector with a `send_message` action (workflow_webhook, messaging_provider)'),
    message: noControl(10_000),
  })
  .strict();

export const scenarioInput = z.object({
  project_id: id,
  name: s.displayName,
  steps: z.array(scenarioStep).min(1).max(100),
  triggers: z.array(scenarioTrigger).max(20).default([]),
  reporters: z.array(scenarioReporter).max(20).default([]),
});

export const scenarioPatch = z.object({
  name: s.displayName,
  steps: z.array(scenarioStep).min(1).max(100),
  triggers: z.array(scenarioTrigger).max(20),
  reporters: z.array(scenarioReporter).max(20),
}).partial();

export type ScenarioStepInput = z.infer<typeof scenarioStep>;
export type ScenarioTrigger = z.infer<typeof scenarioTrigger>;
export type ScenarioReporter = z.infer<typeof scenarioReporter>;

export const scenarioSchema = z
  .object({
    id: z.number().int(),
    project_id: z.number().int(),
    name: z.string(),
    steps: z.array(z.object({ type: z.string(), name: z.string(), params: z.record(z.string(), z.unknown()), continue_on_failure: z.boolean() })),
    triggers: z.array(z.record(z.string(), z.unknown())),
    reporters: z.array(z.object({ on: z.enum(['failure', 'success', 'always']), connector_id: z.number().int(), message: z.string() })),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Scenario' });

export const STEP_STATUSES = ['pending', 'running', 'waiting', 'succeeded', 'failed', 'skipped', 'cancelled'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

export const scenarioStepRunSchema = z
  .object({
    position: z.number().int(),
    name: z.string(),
    type: z.string(),
    status: z.enum(STEP_STATUSES).describe('`waiting`: for a child run it started (a build)'),
    started_at: z.string().nullable(),
    ended_at: z.string().nullable(),
    output: z.record(z.string(), z.unknown()).nullable().describe('What the step answered'),
    error: z.string().nullable(),
  })
  .meta({ id: 'ScenarioStepRun' });

export const stepTypeSchema = z
  .object({ id: z.string(), plugin_id: z.string(), description: z.string().nullable(), params: z.record(z.string(), z.unknown()) })
  .meta({ id: 'StepType' });
