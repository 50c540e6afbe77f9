import { GovernedSqlUnavailableError, QueryTimeoutError } from './read-only-query.ts';

interface Waiter {
  start(): void;
  timer: NodeJS.Timeout;
}

interface Organization {
  running: number;
  waiting: Waiter[];
}

/**
 * Turns of one organization's governed statements: at most `concurrent` run at once, at most
 * `queued` more wait, and a waiting one gives up when its time limit (counted from its arrival)
 * is over. One organization's slow statements thus never wait on another's, nor pile up without end.
 */
export class OrganizationSlots {
  private readonly organizations = new Map<number, Organization>();

  constructor(
    private readonly concurrent: number,
    private readonly queued: number,
  ) {}

  /** Resolves with the function that gives the turn back, once the statement may run. */
  take(orgId: number, timeoutMs: number): Promise<() => void> {
    const organization = this.organizations.get(orgId) ?? { running: 0, waiting: [] };
    this.organizations.set(orgId, organization);
    if (organization.running < this.concurrent) {
      organization.running += 1;
      return Promise.resolve(this.giveBack(orgId, organization));
    }
    if (organization.waiting.length >= this.queued) {
      return Promise.reject(new GovernedSqlUnavailableError(`this organization already has ${this.concurrent + this.queued} queries running or waiting; try again when one has ended`));
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        start: () => {
          clearTimeout(waiter.timer);
          organization.running += 1;
          resolve(this.giveBack(orgId, organization));
        },
        timer: setTimeout(() => {
          organization.waiting.splice(organization.waiting.indexOf(waiter), 1);
          reject(new QueryTimeoutError(`the query waited ${timeoutMs} ms for its turn and was stopped`));
        }, timeoutMs),
      };
      organization.waiting.push(waiter);
    });
  }

  private giveBack(orgId: number, organization: Organization): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      organization.running -= 1;
      const next = organization.waiting.shift();
      if (next) next.start();
      else if (organization.running === 0) this.organizations.delete(orgId);
    };
  }
}
