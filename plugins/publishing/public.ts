/**
 * The publishing plugin's public contract: what the service path's router (api_service) calls, and
 * the registry of published assets other plugins add theirs to.
 */
import { defineExtensionPoint, pluginServiceRef, z, type Maybe, type Principal } from '../../kernel/plugin-api.ts';
import type { EndpointCall } from './calls.ts';
import type { UserCall } from './user-calls.ts';

export type { EndpointCall } from './calls.ts';
export type { CallInput } from './call-input.ts';
export type { UserCall } from './user-calls.ts';

export interface ApiServiceCalls {
  /** Answers one call of an endpoint of a published API Service, or throws the problem (401 aside: the kernel's) the call meets. */
  call(call: EndpointCall): Maybe<unknown>;
  /**
   * The OpenAPI 3.1 document of a published API Service as the data API key `principal` may call it
   * (GET /api/service/{key}/openapi.json), or the problem a call of it meets (404, 403).
   */
  openapi(serviceKey: string, principal: EndpointCall['principal']): Promise<Record<string, unknown>>;
  /**
   * Calls an endpoint of a published API Service of the organization as a signed-in user (an agent
   * tool), with their rights and no fixed inputs; the input (a JSON body) is checked against the
   * endpoint's OpenAPI description first (400 naming each field under `location`); 404 for a service
   * not published here or an endpoint it lacks (naming those it has), 403 without `datasets.read`.
   */
  callAsUser(call: UserCall): Promise<unknown>;
}

export const apiServiceCalls = pluginServiceRef<ApiServiceCalls>('publishing.calls');

/** One published asset of an organization, as `GET /api/publishing/assets` lists it. */
export interface PublishedAsset {
  asset_type: string;
  id: number;
  name: string;
  project_id: number;
  /** The asset's own status (`published` for an API Service listed here). */
  status: string;
  /** The user who published it. */
  published_by: number | null;
  published_at: string;
  /** Where a client reaches it. */
  url: string;
}

/**
 * A kind of published asset (API Services, dashboards…): the organization's published assets of
 * that type. `principal` is the caller, for a source that shows each caller only what they may see.
 */
export interface PublishedAssetSource {
  asset_type: string;
  list(orgId: number, principal?: Principal): Promise<PublishedAsset[]>;
}

/** Checked: one source per asset type; from code only (a manifest cannot hold the function). */
export const publishedAssets = defineExtensionPoint<PublishedAssetSource>({
  id: 'publishing.assets',
  schema: z.object({
    asset_type: z.string().regex(/^[a-z][a-z0-9_]{0,62}$/, 'must be 1 to 63 lower-case letters, digits or _, starting with a letter'),
    list: z.custom<PublishedAssetSource['list']>((value) => typeof value === 'function', 'must be a function (orgId, principal?) => Promise<assets>'),
  }),
  key: (source) => source.asset_type,
});

/** The durable event published in the transaction that publishes an API Service (POST …/{id}/publish). */
export const API_SERVICE_PUBLISHED = 'api_service.published';
export interface ApiServicePublishedEvent {
  service_id: number;
  key: string;
  name: string;
  project_id: number;
  published_by: number;
  published_at: string;
}

/** A data API key as other plugins see it (never its secret). */
export interface DataApiKeyInfo {
  id: number;
  org_id: number;
  service_id: number;
  name: string;
  expires_at: string | null;
  /** The publisher who minted it. */
  minted_by: number | null;
}

export interface DataApiKeys {
  /** Keys not revoked expiring after `from` and at or before `to` (ISO instants), every organization's: for reminders. */
  expiringBetween(from: string, to: string): Promise<DataApiKeyInfo[]>;
}

export const dataApiKeys = pluginServiceRef<DataApiKeys>('publishing.keys');
