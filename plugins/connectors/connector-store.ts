import { problems, type ServiceType, type kernelServices } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';

export interface ConnectorRow {
  id: number;
  org_id: number;
  name: string;
  type: string;
  /** As stored: secret fields sealed by the vault. */
  config: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

export const SECRET_MASK = '********';

/** Connectors of one organization at a time; secret config fields are sealed before they are stored. */
export class ConnectorStore {
  constructor(
    private readonly storage: Storage,
    private readonly vault: ServiceType<typeof kernelServices.vault>,
  ) {}

  private decode = (row: Record<string, unknown>): ConnectorRow => ({ ...(row as unknown as ConnectorRow), config: this.storage.decodeJson(row.config) });

  /** Seals the secret fields of a config (values already sealed stay as they are). */
  seal(config: Record<string, unknown>, secretFields: string[]): Record<string, unknown> {
    return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, secretFields.includes(k) && typeof v === 'string' && !this.vault.isSealed(v) ? this.vault.seal(v) : v]));
  }

  /** The config with secrets opened, for the connector type to use. */
  open(config: Record<string, unknown>): Record<string, unknown> {
    return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, this.vault.isSealed(v) ? this.vault.open(v as string) : v]));
  }

  /** The config as answered: sealed (secret) fields shown as a mask. */
  mask(config: Record<string, unknown>): Record<string, unknown> {
    return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, this.vault.isSealed(v) ? SECRET_MASK : v]));
  }

  async create(orgId: number, input: { name: string; type: string; config: Record<string, unknown> }, userId: number): Promise<ConnectorRow> {
    const now = this.storage.now();
    try {
      const row = await this.storage.db
        .insertInto('connectors')
        .values({ org_id: orgId, name: input.name, type: input.type, config: this.storage.encodeJson(input.config), created_by: userId, created_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      return this.decode(row);
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`a connector named "${input.name}" already exists in this organization`);
      throw err;
    }
  }

  async list(orgId: number): Promise<ConnectorRow[]> {
    return (await this.storage.db.selectFrom('connectors').selectAll().where('org_id', '=', orgId).orderBy('id').execute()).map(this.decode);
  }

  async get(orgId: number, id: number): Promise<ConnectorRow> {
    const row = await this.storage.db.selectFrom('connectors').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no connector ${id} in this organization`);
    return this.decode(row);
  }

  async update(orgId: number, id: number, changes: { name?: string; config?: Record<string, unknown> }): Promise<ConnectorRow> {
    try {
      await this.storage.db
        .updateTable('connectors')
        .set({ ...(changes.name ? { name: changes.name } : {}), ...(changes.config ? { config: this.storage.encodeJson(changes.config) } : {}), updated_at: this.storage.now() })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .execute();
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`a connector named "${changes.name}" already exists in this organization`);
      throw err;
    }
    return this.get(orgId, id);
  }

  async remove(orgId: number, id: number): Promise<void> {
    await this.get(orgId, id);
    await this.storage.db.deleteFrom('connectors').where('org_id', '=', orgId).where('id', '=', id).execute();
  }
}
