import type { DataColumn } from '../../../storage/index.ts';

export interface LlmPromptParams {
  connection_id: number;
  model?: string;
  prompt_template: string;
  system_prompt?: string;
  output_column?: string;
  batch_size?: number;
  concurrency?: number;
  max_tokens?: number;
  temperature?: number;
  on_error?: 'fail' | 'null';
}

/** What a run prompts with, fixed when it starts (the `start` call). */
export interface LlmPromptStart {
  output: string;
  /** The input columns the template names. */
  placeholders: string[];
  columns: DataColumn[];
}

export const LLM_PROMPT_PARAMS = {
  type: 'object',
  additionalProperties: false,
  required: ['connection_id', 'prompt_template'],
  properties: {
    connection_id: { type: 'integer', minimum: 1, description: 'An LLM connection of this organization (the mesh: guardrails, quotas, limits and usage apply to every row)' },
    model: { type: 'string', minLength: 1, maxLength: 200, description: 'Default: the connection\u2019s default_model' },
    prompt_template: { type: 'string', minLength: 1, maxLength: 100_000, description: 'The prompt of each row: {{column}} is replaced by the row\u2019s value of that column (nothing else is evaluated)' },
    system_prompt: { type: 'string', maxLength: 100_000 },
    output_column: { type: 'string', minLength: 1, maxLength: 63, pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'Where each answer lands (default llm_output)' },
    batch_size: { type: 'integer', minimum: 1, maximum: 1000, description: 'Rows sent from the handler per call (default 20)' },
    concurrency: { type: 'integer', minimum: 1, maximum: 32, description: 'Model calls at once (default 4)' },
    max_tokens: { type: 'integer', minimum: 1, maximum: 100_000 },
    temperature: { type: 'number', minimum: 0, maximum: 2 },
    on_error: { enum: ['fail', 'null'], description: 'A row whose call is refused or fails: fail the run (default), or write null and go on (each logged)' },
  },
};

/** `{{ column }}` placeholders of a template: a name of letters, digits and _. */
export const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** The template filled with a row's values (text as is, others as JSON; null as empty). */
export function fillTemplate(template: string, row: Record<string, unknown>): string {
  return template.replace(PLACEHOLDER, (_, name: string) => {
    const value = row[name];
    return value === null || value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  });
}
