/**
 * Turns of long reads (see `Storage.longReads`): at most `total` statements run at once, at most
 * `perOrganization` of them for one organization. The others wait: each organization's statements
 * in the order they came, organizations one after another (an organization that just got a turn
 * goes last). So one tenant's many or slow reads never take every worker, nor hold up another's.
 */
export class ReadTurns {
  private running = 0;
  private readonly runningFor = new Map<number, number>();
  /** Waiting statements per organization, in the order organizations get their turn. */
  private readonly waiting = new Map<number, (() => void)[]>();

  constructor(
    readonly total: number,
    readonly perOrganization: number,
  ) {}

  /** Runs `work` in a turn of the organization's, given back when it settles. */
  async during<T>(orgId: number, work: () => Promise<T>): Promise<T> {
    const giveBack = await this.take(orgId);
    try {
      return await work();
    } finally {
      giveBack();
    }
  }

  /** Resolves, once the statement may run, with the function that gives the turn back (once). */
  take(orgId: number): Promise<() => void> {
    return new Promise((resolve) => {
      const queue = this.waiting.get(orgId) ?? [];
      queue.push(() => resolve(this.giveBack(orgId)));
      this.waiting.set(orgId, queue);
      this.dispatch();
    });
  }

  private dispatch(): void {
    // An organization served here goes back to the end of the map, and is visited again only if
    // it may still run more: the loop ends once every waiting organization is at its bound.
    for (const [orgId, queue] of this.waiting) {
      if (this.running >= this.total) return;
      if ((this.runningFor.get(orgId) ?? 0) >= this.perOrganization) continue;
      const start = queue.shift()!;
      this.waiting.delete(orgId);
      if (queue.length) this.waiting.set(orgId, queue);
      this.running += 1;
      this.runningFor.set(orgId, (this.runningFor.get(orgId) ?? 0) + 1);
      start();
    }
  }

  private giveBack(orgId: number): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.running -= 1;
      const left = this.runningFor.get(orgId)! - 1;
      if (left) this.runningFor.set(orgId, left);
      else this.runningFor.delete(orgId);
      this.dispatch();
    };
  }
}
