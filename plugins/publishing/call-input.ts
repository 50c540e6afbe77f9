import { problems, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import type { InputSource } from './inputs.ts';
import type { FixedParams } from './key-store.ts';

/** What a call of an endpoint brings: its inputs and where they came from. */
export interface CallInput {
  source: InputSource;
  values: Record<string, unknown>;
}

/** What every endpoint run gets: the organization, the publisher's principal and the key's locked inputs. */
export interface EndpointContext {
  orgId: number;
  publisher: Principal;
  fixed: FixedParams;
  audit: RequestAudit;
}

/** An input's value in `values` (a caller's or a key's fixed ones), never one of Object's own (`toString`): undefined when not there. */
export const inputOf = (values: Readonly<Record<string, unknown>>, name: string): unknown => (Object.hasOwn(values, name) ? values[name] : undefined);

/** A 400 for a caller input (named `<at>.<name>`) the endpoint does not take, or one the key locks. */
export function refuseInputs(values: Record<string, unknown>, at: string, known: ReadonlySet<string>, fixed: FixedParams): void {
  for (const name of Object.keys(values)) {
    const path = `${at}.${name}`;
    if (Object.hasOwn(fixed, name)) throw problems.badRequest(`${path}: fixed by this API key; leave it out`, [{ path, message: 'fixed by this API key' }]);
    if (!known.has(name)) throw problems.badRequest(`${path}: this endpoint takes no input "${name}"`, [{ path, message: 'unknown input' }]);
  }
}

/**
 * A 403 when the key fixes an input the endpoint does not take (its service changed since the key
 * was minted): a key scoped by that input must not reach rows the scope no longer limits.
 */
export function refuseUnfixable(fixed: FixedParams, takes: ReadonlySet<string>): void {
  for (const name of Object.keys(fixed)) {
    if (!takes.has(name)) throw problems.forbidden(`this API key fixes "${name}", which this endpoint no longer takes: the key may not call it`);
  }
}
