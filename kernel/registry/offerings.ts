import type { Contribution, Disposable } from '../plugin-api.ts';

interface ProvidedPoint {
  ownerId: string;
  accept: (contribution: Contribution<unknown>) => Disposable | void;
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

  /** The owner of an extension point, if provided. */
  pointOwner(pointId: string): string | undefined {
    return this.points.get(pointId)?.ownerId;
  }

  providePoint(pointId: string, ownerId: string, accept: ProvidedPoint['accept']) {
    this.points.set(pointId, { ownerId, accept });
  }

  /** Hands a contribution to the point's owner; returns the owner's undo, if any. */
  contribute(pointId: string, contribution: Contribution<unknown>): Disposable | void {
    return this.points.get(pointId)?.accept(contribution);
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
