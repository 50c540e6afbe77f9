import { ChangeCountedCache, problems, type DomainEvents, type Maybe, type StoredActor } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Endpoint } from './endpoints.ts';
import { PUBLISHING_COUNTER } from './migrations.ts';
import { API_SERVICE_PUBLISHED, type ApiServicePublishedEvent } from './public.ts';

export const SERVICE_STATUSES = ['draft', 'published', 'unpublished'] as const;
export type ServiceStatus = (typeof SERVICE_STATUSES)[number];

export interface ApiService {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  key: string;
  status: ServiceStatus;
  endpoints: Endpoint[];
  /** Whose rights the endpoints read with (the user and their token's scopes), from the last publish. */
  publisher: StoredActor | null;
  published_at: string | null;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

export type ServiceFields = Pick<ApiService, 'project_id' | 'name' | 'key' | 'endpoints'>;

/** API Services: one organization's at a time, and any by its platform-wide key for the service path. */
export class ServiceStore {
  private readonly byKeyKnown: ChangeCountedCache<string, ApiService | undefined>;

  constructor(
    private readonly storage: Storage,
    private readonly events: DomainEvents,
  ) {
    this.byKeyKnown = new ChangeCountedCache(storage, PUBLISHING_COUNTER);
  }

  private decode(row: Record<string, any>): ApiService {
    const { published_by, published_scopes, ...rest } = row;
    return {
      ...(rest as Omit<ApiService, 'publisher'>),
      id: Number(row.id),
      org_id: Number(row.org_id),
      project_id: Number(row.project_id),
      endpoints: this.storage.decodeJson<Endpoint[]>(row.endpoints),
      publisher: published_by === null ? null : { userId: Number(published_by), scopes: published_scopes === null ? null : this.storage.decodeJson<string[]>(published_scopes) },
      created_by: row.created_by === null ? null : Number(row.created_by),
    };
  }

  /** A key taken (by any organization's service) is a 409 naming it. */
  private async keyUnique<T>(key: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`the service key "${key}" is taken; choose another`);
      throw err;
    }
  }

  create(orgId: number, fields: ServiceFields, userId: number | null): Promise<ApiService> {
    const now = this.storage.now();
    return this.keyUnique(fields.key, async () =>
      this.decode(
        await this.storage.db
          .insertInto('publishing_services')
          .values({ org_id: orgId, project_id: fields.project_id, name: fields.name, key: fields.key, status: 'draft', endpoints: this.storage.encodeJson(fields.endpoints), created_by: userId, created_at: now, updated_at: now })
          .returningAll()
          .executeTakeFirstOrThrow(),
      ),
    );
  }

  async list(orgId: number, projectId?: number): Promise<ApiService[]> {
    let query = this.storage.db.selectFrom('publishing_services').selectAll().where('org_id', '=', orgId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    return (await query.orderBy('id').execute()).map((row) => this.decode(row));
  }

  async get(orgId: number, id: number): Promise<ApiService> {
    const row = await this.storage.db.selectFrom('publishing_services').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no API Service ${id} in this organization`);
    return this.decode(row);
  }

  async countInProject(orgId: number, projectId: number): Promise<number> {
    const row = await this.storage.db.selectFrom('publishing_services').select((eb) => eb.fn.countAll().as('n')).where('org_id', '=', orgId).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** The service a call names by its key, whatever its organization or status (from memory until services or keys change). */
  byKey(key: string): Maybe<ApiService | undefined> {
    return this.byKeyKnown.get(key, async () => {
      const row = await this.storage.db.selectFrom('publishing_services').selectAll().where('key', '=', key).executeTakeFirst();
      return row && this.decode(row);
    });
  }

  /** Changes the fields given; `publisher` when the endpoints of a published service change (they read with the changer's rights). */
  async update(orgId: number, id: number, fields: Partial<Omit<ServiceFields, 'project_id'>>, publisher?: StoredActor): Promise<ApiService> {
    const { endpoints, ...rest } = fields;
    const set = { ...rest, ...(endpoints ? { endpoints: this.storage.encodeJson(endpoints) } : {}), ...(publisher ? this.publishedBy(publisher) : {}), updated_at: this.storage.now() };
    await this.keyUnique(fields.key ?? '', () => this.storage.db.updateTable('publishing_services').set(set).where('org_id', '=', orgId).where('id', '=', id).execute());
    return this.get(orgId, id);
  }

  /**
   * Publishing records who published: the endpoints read with that user's rights (narrowed to their
   * token's scopes) from then on. `api_service.published` is published in the same transaction.
   */
  async publish(orgId: number, id: number, publisher: StoredActor): Promise<ApiService> {
    await this.storage.transaction(async (trx) => {
      const row = await trx
        .updateTable('publishing_services')
        .set({ status: 'published', ...this.publishedBy(publisher), published_at: this.storage.now(), updated_at: this.storage.now() })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .returning(['id', 'key', 'name', 'project_id', 'published_at'])
        .executeTakeFirst();
      if (!row) throw problems.notFound(`no API Service ${id} in this organization`);
      const payload: ApiServicePublishedEvent = { service_id: Number(row.id), key: row.key, name: row.name, project_id: Number(row.project_id), published_by: publisher.userId, published_at: row.published_at };
      await this.events.publish({ type: API_SERVICE_PUBLISHED, orgId, payload }, trx);
    });
    return this.get(orgId, id);
  }

  /** Calls answer 404 until it is published again; who published it stays recorded. */
  unpublish(orgId: number, id: number): Promise<ApiService> {
    return this.setStatus(orgId, id, { status: 'unpublished' });
  }

  private async setStatus(orgId: number, id: number, set: { status: Exclude<ServiceStatus, 'draft'> } & Record<string, unknown>): Promise<ApiService> {
    await this.storage.db.updateTable('publishing_services').set({ ...set, updated_at: this.storage.now() }).where('org_id', '=', orgId).where('id', '=', id).execute();
    return this.get(orgId, id);
  }

  private publishedBy(publisher: StoredActor) {
    return { published_by: publisher.userId, published_scopes: publisher.scopes === null ? null : this.storage.encodeJson(publisher.scopes) };
  }

  /** Deletes the service and (cascading) its keys. */
  async remove(orgId: number, id: number): Promise<void> {
    const removed = await this.storage.db.deleteFrom('publishing_services').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (Number(removed.numDeletedRows) === 0) throw problems.notFound(`no API Service ${id} in this organization`);
  }
}
