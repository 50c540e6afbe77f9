import { pluginServiceRef } from '../../kernel/plugin-api.ts';
import type { Branding, Logo } from './branding-store.ts';

export type { Branding, Logo } from './branding-store.ts';

/** An organization's branding with the name it is shown under: its display name, else the organization's name. */
export type ShownBranding = Branding & { shown_name: string };

/** An organization's branding, for what renders in its name (published pages, e-mails). */
export interface OrganizationBranding {
  get(orgId: number): Promise<ShownBranding>;
  logo(orgId: number): Promise<(Logo & { sha256: string }) | null>;
}

export const organizationBranding = pluginServiceRef<OrganizationBranding>('branding.organization');
