import fs from 'node:fs';
import path from 'node:path';
import { validRange } from 'semver';
import { z } from 'zod';

export const ROLES = ['admin', 'editor', 'viewer', 'management', 'cs_staff'] as const;

const pluginId = z.string().regex(/^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$/, 'must be lower-case words joined by - or _ (e.g. data_quality_rules)');
const semver = z.string().regex(/^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/, 'must be a semantic version such as 1.2.3');

const capability = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/, 'must be dotted lower-case words such as datasets.read'),
    description: z.string().min(1),
    /** Legacy roles whose baseline includes this capability; platform admins hold every capability. */
    roles: z.array(z.enum(ROLES)).default([]),
    /**
     * `organization` (default): works inside the current organization and may be granted through
     * that organization's groups. `platform`: reaches beyond any one organization (users,
     * plugins, new organizations), so only a role baseline grants it, never a group.
     */
    scope: z.enum(['organization', 'platform']).default('organization'),
  })
  .strict();

export const manifestSchema = z
  .object({
    $schema: z.string().optional(),
    id: pluginId,
    version: semver,
    kind: z.enum(['router', 'connector', 'recipe-type', 'extension']),
    description: z.string().optional(),
    /**
     * Entry module, relative to the manifest file's folder. A plugin that only contributes from its
     * manifest (a recipe type whose handler a manifest names) needs none.
     */
    entry: z.string().min(1).optional(),
    /** A required plugin that fails stops start-up instead of being skipped. */
    required: z.boolean().default(false),
    /** A disabled plugin is listed but not loaded. */
    enabled: z.boolean().default(true),
    /**
     * Whether the plugin serves an organization that has not chosen (PUT /api/plugins/{id}/organizations/{org_id}):
     * false keeps it off until an organization turns it on.
     */
    default_enabled: z.boolean().default(true),
    router: z
      .object({
        prefix: z.string().regex(/^\/api(\/[a-z0-9-]+)+$/, 'must be a path under /api such as /api/projects'),
        tag: z.string().min(1),
        /** Where the router's pages (routes declared `page: true`: HTML for a browser, e.g. a published dashboard) are mounted. */
        pages: z.string().regex(/^\/p(\/[a-z0-9-]+)+$/, 'must be a path under /p such as /p/dashboards').optional(),
      })
      .strict()
      .optional(),
    capabilities: z.array(capability).default([]),
    depends_on: z.array(pluginId).default([]),
    /**
     * Tables its migrations create outside its own prefix (`<id>` or `<id>_…`): only those a plugin
     * created before the prefix rule, kept under their names.
     */
    tables: z.array(z.string().regex(/^[a-z][a-z0-9_]*$/, 'must be a lower-case table name')).default([]),
    /** The kernel versions the plugin supports, as a semver range (e.g. `^0.1.0`); any when absent. */
    kernel: z
      .string()
      .refine((range) => validRange(range) !== null, 'must be a semver range such as ^0.1.0')
      .optional(),
    /** Declarative contributions: extension point id → entries handed to the point's owner. */
    contributes: z.record(z.string(), z.array(z.unknown())).default({}),
    /** The plugin's own settings, checked against its definition's `config` schema when it loads. */
    config: z.record(z.string(), z.unknown()).default({}),
  })
  // Any other field must be a list contributed to the extension point that names it (its
  // `manifestKey`, e.g. `recipe_types`); an unknown one fails the plugin's load, naming it.
  .catchall(z.array(z.unknown()))
  .superRefine((manifest, ctx) => {
    for (const key of extraManifestKeys(manifest)) {
      if (!MANIFEST_KEY.test(key)) ctx.addIssue({ code: 'custom', path: [key], message: 'is not a manifest field' });
    }
    if (!manifest.entry && (manifest.kind === 'router' || manifest.kind === 'connector')) {
      ctx.addIssue({ code: 'custom', path: ['entry'], message: `a ${manifest.kind} plugin must name its entry module` });
    }
    if (manifest.kind === 'router' && !manifest.router) {
      ctx.addIssue({ code: 'custom', path: ['router'], message: 'a router plugin must declare router.prefix and router.tag' });
    }
    if (manifest.required && !manifest.default_enabled) {
      ctx.addIssue({ code: 'custom', path: ['default_enabled'], message: 'a required plugin serves every organization: it cannot be off by default' });
    }
    if (manifest.depends_on.includes(manifest.id)) {
      ctx.addIssue({ code: 'custom', path: ['depends_on'], message: 'a plugin cannot depend on itself' });
    }
  });

export type PluginManifest = z.output<typeof manifestSchema>;

/** What an extension point's `manifestKey` may be. */
const MANIFEST_KEY = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/;
const KNOWN_FIELDS = new Set(Object.keys(manifestSchema.shape));

/** The fields of a manifest beyond the schema's own: contributions to points by their `manifestKey`. */
export function extraManifestKeys(manifest: Record<string, unknown>): string[] {
  return Object.keys(manifest).filter((key) => !KNOWN_FIELDS.has(key));
}

/** A manifest file as read from disk: parsed, or the reason it could not be. */
export type ManifestRead =
  | { file: string; ok: true; manifest: PluginManifest; source: string }
  | { file: string; ok: false; error: string; source: string | null };

/** Reads and validates one manifest; a failure names the file, the field and the reason. */
export function readManifest(file: string): ManifestRead {
  let source: string;
  try {
    source = fs.readFileSync(file, 'utf8');
  } catch (err) {
    return { file, ok: false, error: `${file}: cannot be read: ${(err as Error).message}`, source: null };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(source);
  } catch (err) {
    return { file, ok: false, error: `${file}: not valid JSON: ${(err as Error).message}`, source };
  }
  const parsed = manifestSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.length ? issue.path.join('.') : '(root)';
    const keys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
    return { file, ok: false, error: `${file}: field ${field}: ${issue.message}${keys}`, source };
  }
  return { file, ok: true, manifest: parsed.data, source };
}

/** Every `*.json` file of the manifest folders, in a stable order. */
export function listManifestFiles(dirs: string[]): string[] {
  const files: string[] = [];
  for (const dir of dirs) {
    if (!fs.existsSync(dir)) continue;
    for (const name of fs.readdirSync(dir).sort()) {
      if (name.endsWith('.json')) files.push(path.resolve(dir, name));
    }
  }
  return files;
}
