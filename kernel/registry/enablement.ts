import type { Storage } from '../../storage/index.ts';
import { andThen, type Maybe } from '../maybe.ts';
import { PLUGIN_ENABLEMENT_COUNTER } from '../migrations/index.ts';
import type { OrganizationPluginSetting, PluginEnablementService } from '../plugin-api.ts';
import { problems } from '../problem.ts';
import type { PluginManifest } from './manifest.ts';

const TABLE = 'plugin_organizations';
/** Organizations whose choices are kept at most; the oldest go first. */
const CAPACITY = 10_000;

type Choices = ReadonlyMap<string, boolean>;

interface ChoiceRow {
  plugin_id: string;
  enabled: unknown;
  updated_at: string;
}

/**
 * Which plugins serve which organization. An organization's own choice (a row) wins over the
 * manifest's `default_enabled`; a required plugin serves every organization.
 *
 * Every organization's choices are read once and kept until the database's plugin-enablement
 * change counter moves (bumped in the transaction of any change, whoever makes it): a switch
 * turned on any instance holds on every instance from its next request, and an unchanged table
 * costs the counter's read only (a synchronous point read on SQLite).
 */
export class PluginEnablement implements PluginEnablementService {
  private counter: number | undefined;
  private readonly choices = new Map<number, Choices | Promise<Choices>>();

  constructor(
    private readonly storage: Storage,
    /** The manifest of a plugin by id (the live version's, else as read), undefined when none declares it. */
    private readonly manifestOf: (pluginId: string) => PluginManifest | undefined,
  ) {}

  isEnabled(pluginId: string, orgId: number): Maybe<boolean> {
    const manifest = this.manifestOf(pluginId);
    if (!manifest) return false;
    if (manifest.required) return true;
    return andThen(this.choicesOf(orgId), (choices) => choices.get(pluginId) ?? manifest.default_enabled);
  }

  async setting(pluginId: string, orgId: number): Promise<OrganizationPluginSetting> {
    const manifest = this.declared(pluginId);
    const row = (await this.storage.db
      .selectFrom(TABLE)
      .select(['plugin_id', 'enabled', 'updated_at'])
      .where('plugin_id', '=', pluginId)
      .where('org_id', '=', orgId)
      .executeTakeFirst()) as ChoiceRow | undefined;
    return describe(manifest, orgId, row);
  }

  async set(pluginId: string, orgId: number, enabled: boolean, byUserId: number | null): Promise<OrganizationPluginSetting> {
    const manifest = this.declared(pluginId);
    if (manifest.required && !enabled) throw problems.conflict(`plugin "${pluginId}" is required: it serves every organization and cannot be disabled for one`);
    const now = this.storage.now();
    const row = (await this.storage.db
      .insertInto(TABLE)
      .values({ plugin_id: pluginId, org_id: orgId, enabled, updated_at: now, updated_by: byUserId })
      .onConflict((oc) => oc.columns(['plugin_id', 'org_id']).doUpdateSet({ enabled, updated_at: now, updated_by: byUserId }))
      .returning(['plugin_id', 'enabled', 'updated_at'])
      .executeTakeFirstOrThrow()) as ChoiceRow;
    return describe(manifest, orgId, row);
  }

  private declared(pluginId: string): PluginManifest {
    const manifest = this.manifestOf(pluginId);
    if (!manifest) throw problems.notFound(`no plugin with id "${pluginId}"`);
    return manifest;
  }

  private choicesOf(orgId: number): Maybe<Choices> {
    return andThen(this.storage.changeCounter(PLUGIN_ENABLEMENT_COUNTER), (counter) => {
      if (counter !== this.counter) {
        // Whatever was read (or is being read) before this value is stale.
        this.choices.clear();
        this.counter = counter;
      }
      const known = this.choices.get(orgId);
      if (known) return known;
      const reading = this.read(orgId);
      if (this.choices.size >= CAPACITY) this.choices.delete(this.choices.keys().next().value!);
      this.choices.set(orgId, reading);
      reading.then(
        // Kept only if no newer counter dropped the entry while it was being read.
        (value) => this.choices.get(orgId) === reading && this.choices.set(orgId, value),
        () => this.choices.get(orgId) === reading && this.choices.delete(orgId),
      );
      return reading;
    });
  }

  private async read(orgId: number): Promise<Choices> {
    const rows = (await this.storage.db.selectFrom(TABLE).select(['plugin_id', 'enabled']).where('org_id', '=', orgId).execute()) as ChoiceRow[];
    return new Map(rows.map((r) => [r.plugin_id, Boolean(r.enabled)]));
  }
}

function describe(manifest: PluginManifest, orgId: number, row: ChoiceRow | undefined): OrganizationPluginSetting {
  const chosen = row ? Boolean(row.enabled) : manifest.default_enabled;
  return {
    plugin_id: manifest.id,
    org_id: orgId,
    enabled: manifest.required || chosen,
    default_enabled: manifest.default_enabled,
    required: manifest.required,
    updated_at: row?.updated_at ?? null,
  };
}
