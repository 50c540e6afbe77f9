/** The publishing plugin's public contract: what the service path's router (api_service) calls. */
import { pluginServiceRef } from '../../kernel/plugin-api.ts';
import type { EndpointCall } from './calls.ts';

export type { EndpointCall } from './calls.ts';
export type { CallInput } from './call-input.ts';

export interface ApiServiceCalls {
  /** Answers one call of an endpoint of a published API Service, or throws the problem (401 aside: the kernel's) the call meets. */
  call(call: EndpointCall): Promise<unknown>;
}

export const apiServiceCalls = pluginServiceRef<ApiServiceCalls>('publishing.calls');
