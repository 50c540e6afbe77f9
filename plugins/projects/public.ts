/**
 * The projects plugin's public contract: what plugins depending on it may import (references and
 * types only; everything else in this folder is private to the plugin).
 */
import { defineExtensionPoint, pluginServiceRef, z } from '../../kernel/plugin-api.ts';

export interface ProjectCatalog {
  /** True when the project exists in the organization. */
  exists(orgId: number, projectId: number): Promise<boolean>;
}

export const projectCatalog = pluginServiceRef<ProjectCatalog>('projects.catalog');

/** Asked before a project is deleted: a reason to refuse (e.g. "holds 3 datasets"), or null. */
export type ProjectDeleteGuard = (orgId: number, projectId: number) => Promise<string | null>;

/** Checked: a contribution must be a function (from code only: a manifest cannot hold one). */
export const projectDeleteGuards = defineExtensionPoint<ProjectDeleteGuard>({
  id: 'projects.delete-guards',
  schema: z.custom<ProjectDeleteGuard>((value) => typeof value === 'function', 'must be a function (orgId, projectId) => Promise<string | null>'),
});
