import { z } from 'zod';

export const pluginStatusSchema = z
  .object({
    id: z.string(),
    version: z.string().nullable(),
    kind: z.string().nullable(),
    state: z.enum(['loaded', 'failed', 'disabled']),
    reason: z.string().nullable().describe('Why the plugin failed to load'),
    reason_code: z.string().nullable().describe('The stable code of `reason` (`KRN_ERR_…`)'),
    manifest_file: z.string(),
    prefix: z.string().nullable(),
    loaded_at: z.string().nullable(),
    last_reload_error: z.string().nullable().describe('Set when the newest reload failed and the previous version kept serving'),
  })
  .meta({ id: 'PluginStatus' });

export const recipeTypeSchema = z
  .object({
    id: z.string(),
    plugin_id: z.string(),
    description: z.string().nullable(),
    params: z.record(z.string(), z.unknown()).describe('JSON Schema of the recipe parameters'),
  })
  .meta({ id: 'RecipeType' });

export const pluginIdParams = z.object({ id: z.string().min(1).describe('Plugin id') });

export const organizationSettingSchema = z
  .object({
    plugin_id: z.string(),
    org_id: z.number().int(),
    enabled: z.boolean().describe('Whether the plugin serves the organization: its org-scoped routes answer and its contributions are offered there'),
    default_enabled: z.boolean().describe('The manifest\u2019s default_enabled: what holds while the organization has not chosen'),
    required: z.boolean().describe('A required plugin serves every organization and cannot be disabled'),
    updated_at: z.string().nullable().describe('When the organization last chose; null while the default holds'),
  })
  .meta({ id: 'PluginOrganizationSetting' });
