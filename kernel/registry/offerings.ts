import type { Contribution, Disposable, ExtensionPoint, ExtensionPointOwner } from '../plugin-api.ts';
import { PluginLoadError, pluginErrors } from './plugin-errors.ts';

/** The owner of the extension points the kernel itself offers; every plugin may contribute to them. */
export const KERNEL_OWNER = 'kernel';

interface ProvidedPoint {
  ownerId: string;
  point: ExtensionPoint<unknown>;
  accept: (contribution: Contribution<unknown>) => Disposable | void | Promise<Disposable | void>;
  owner: ExtensionPointOwner<unknown>;
  /** Who contributes each key, and how many of its versions do (a reloading plugin's new version contributes before the old one withdraws). */
  keys: Map<string, { pluginId: string; count: number }>;
}

interface ProvidedService {
  ownerId: string;
  implementation: unknown;
}

/**
 * What plugins offer the plugins that depend on them: extension points (to contribute to) and
 * services (to call). A reload works on a copy (`fork`) so a failed reload leaves the live table
 * untouched.
 */
export class OfferingTable {
  constructor(
    private readonly points = new Map<string, ProvidedPoint>(),
    private readonly services = new Map<string, ProvidedService>(),
  ) {}

  fork(withoutOwners: Set<string>): OfferingTable {
    const keep = <T extends { ownerId: string }>(map: Map<string, T>) => new Map([...map].filter(([, offer]) => !withoutOwners.has(offer.ownerId)));
    return new OfferingTable(keep(this.points), keep(this.services));
  }

  /** Forgets everything a plugin offered (its init failed after offering it). */
  removeOwner(ownerId: string) {
    for (const map of [this.points, this.services] as Map<string, { ownerId: string }>[]) {
      for (const [id, offer] of map) if (offer.ownerId === ownerId) map.delete(id);
    }
  }

  /** The extension point a top-level manifest field contributes to (its `manifestKey`), if provided. */
  pointByManifestKey(key: string): string | undefined {
    for (const [id, provided] of this.points) if (provided.point.manifestKey === key) return id;
    return undefined;
  }

  /** The owner of an extension point, if provided. */
  pointOwner(pointId: string): string | undefined {
    return this.points.get(pointId)?.ownerId;
  }

  providePoint(point: ExtensionPoint<unknown>, ownerId: string, accept: ProvidedPoint['accept'], owner: ExtensionPointOwner<unknown> = {}) {
    this.points.set(point.id, { ownerId, point, accept, owner, keys: new Map() });
  }

  /**
   * Checks a contribution against its point (schema, unique key) and its owner's `check` without
   * handing it over; a refused one throws, naming why.
   */
  async check(pointId: string, contribution: Contribution<unknown>): Promise<void> {
    const provided = this.points.get(pointId);
    if (!provided) return;
    keyOf(provided, pointId, contribution);
    await refusedAs(pointId, contribution, async () => provided.owner.check?.(contribution));
  }

  /**
   * Checks a contribution against its point (schema, unique key) and hands it to the point's owner;
   * resolves to what withdraws it. A refused contribution rejects, naming why.
   */
  async contribute(pointId: string, contribution: Contribution<unknown>): Promise<Disposable | void> {
    const provided = this.points.get(pointId);
    if (!provided) return;
    const key = keyOf(provided, pointId, contribution);
    if (key === undefined) return refusedAs(pointId, contribution, async () => provided.accept(contribution));
    const { keys } = provided;
    // The key is held while the owner decides, so no other contribution takes it meanwhile.
    const held = keys.get(key);
    keys.set(key, { pluginId: contribution.pluginId, count: (held?.count ?? 0) + 1 });
    const release = () => {
      const current = keys.get(key);
      if (current && current.pluginId === contribution.pluginId) {
        if (current.count > 1) current.count -= 1;
        else keys.delete(key);
      }
    };
    let undo: Disposable | void;
    try {
      undo = await refusedAs(pointId, contribution, async () => provided.accept(contribution));
    } catch (err) {
      release();
      throw err;
    }
    return async () => {
      release();
      await undo?.();
    };
  }

  /** The contributions to a point offered in an organization, as its owner lists them; empty while none provides it. */
  async list(pointId: string, orgId: number | null): Promise<unknown[]> {
    return (await this.points.get(pointId)?.owner.list?.(orgId)) ?? [];
  }

  serviceOwner(serviceId: string): string | undefined {
    return this.services.get(serviceId)?.ownerId;
  }

  provideService(serviceId: string, ownerId: string, implementation: unknown) {
    this.services.set(serviceId, { ownerId, implementation });
  }

  service(serviceId: string): unknown {
    return this.services.get(serviceId)?.implementation;
  }
}

/** Runs an owner's check or accept: what it throws refuses the contribution with a coded reason. */
async function refusedAs<T>(pointId: string, contribution: Contribution<unknown>, decide: () => Promise<T>): Promise<T> {
  try {
    return await decide();
  } catch (err) {
    if (err instanceof PluginLoadError) throw err;
    throw pluginErrors.contributionInvalid(contribution.pluginId, pointId, (err as Error).message);
  }
}

/** The contribution's key at its point, once its value matches the point's schema and no other plugin holds the key. */
function keyOf({ point, keys }: ProvidedPoint, pointId: string, contribution: Contribution<unknown>): string | undefined {
  if (point.schema) {
    const checked = point.schema.safeParse(contribution.value);
    if (!checked.success) {
      const issue = checked.error.issues[0];
      throw pluginErrors.contributionInvalid(contribution.pluginId, pointId, `${issue.path.join('.') || '(the value)'}: ${issue.message}`);
    }
  }
  const key = point.key?.(contribution.value);
  const holder = key === undefined ? undefined : keys.get(key);
  if (holder && holder.pluginId !== contribution.pluginId) throw pluginErrors.contributionDuplicate(contribution.pluginId, pointId, key!, holder.pluginId);
  return key;
}
