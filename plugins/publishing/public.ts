/** The publishing plugin's public contract: what the service path's router (api_service) calls. */
import { pluginServiceRef } from '../../kernel/plugin-api.ts';
import type { EndpointCall } from './calls.ts';

export type { EndpointCall } from './calls.ts';
export type { CallInput } from './call-input.ts';

export interface ApiServiceCalls {
  /** Answers one call of an endpoint of a published API Service, or throws the problem (401 aside: the kernel's) the call meets. */
  call(call: EndpointCall): Promise<unknown>;
  /**
   * The OpenAPI 3.1 document of a published API Service as the data API key `principal` may call it
   * (GET /api/service/{key}/openapi.json), or the problem a call of it meets (404, 403).
   */
  openapi(serviceKey: string, principal: EndpointCall['principal']): Promise<Record<string, unknown>>;
}

export const apiServiceCalls = pluginServiceRef<ApiServiceCalls>('publishing.calls');
