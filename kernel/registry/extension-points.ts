import type { Contribution, Disposable } from '../plugin-api.ts';

interface ProvidedPoint {
  ownerId: string;
  accept: (contribution: Contribution<unknown>) => Disposable | void;
}

/**
 * Which plugin provides which extension point. A reload works on a copy (`fork`) so that a failed
 * reload leaves the live table untouched.
 */
export class ExtensionPointTable {
  constructor(private readonly points = new Map<string, ProvidedPoint>()) {}

  fork(withoutOwners: Set<string>): ExtensionPointTable {
    return new ExtensionPointTable(new Map([...this.points].filter(([, p]) => !withoutOwners.has(p.ownerId))));
  }

  /** The owner of a point, if provided. */
  owner(pointId: string): string | undefined {
    return this.points.get(pointId)?.ownerId;
  }

  /** Forgets every point a plugin offered (its init failed after offering them). */
  removeOwner(ownerId: string) {
    for (const [pointId, point] of this.points) if (point.ownerId === ownerId) this.points.delete(pointId);
  }

  provide(pointId: string, ownerId: string, accept: ProvidedPoint['accept']) {
    this.points.set(pointId, { ownerId, accept });
  }

  /** Hands a contribution to the point's owner; returns the owner's undo, if any. */
  contribute(pointId: string, contribution: Contribution<unknown>): Disposable | void {
    return this.points.get(pointId)?.accept(contribution);
  }
}
