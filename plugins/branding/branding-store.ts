import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Storage } from '../../storage/index.ts';
import type { LogoType } from './logo.ts';

/** The colours an organization has until it sets its own: the platform's. */
export const DEFAULT_COLORS = { primary_color: '#1f4e79', accent_color: '#f28c28' } as const;

/** What an organization's branding says; null where it keeps the default. */
export interface BrandingSettings {
  display_name: string | null;
  primary_color: string | null;
  accent_color: string | null;
  email_footer: string | null;
}

export interface LogoInfo {
  content_type: LogoType;
  bytes: number;
  sha256: string;
  updated_at: string;
}

/** An organization's branding as answered: its settings with the defaults filled in, and its logo's description. */
export interface Branding {
  display_name: string | null;
  primary_color: string;
  accent_color: string;
  email_footer: string | null;
  logo: LogoInfo | null;
  updated_at: string | null;
}

export interface Logo {
  type: LogoType;
  data: Buffer;
}

/**
 * The logo's size in bytes, worked out by the database from its base64 text so that describing the
 * branding does not fetch the image: four characters hold three bytes, less one per `=` of padding.
 */
const LOGO_BYTES = sql<number>`length(logo_base64) / 4 * 3 - (case when logo_base64 like '%==' then 2 when logo_base64 like '%=' then 1 else 0 end)`;

const NONE: BrandingSettings = { display_name: null, primary_color: null, accent_color: null, email_footer: null };

/** The `branding` table: one row per organization that changed anything. */
export class BrandingStore {
  constructor(private readonly storage: Storage) {}

  async get(orgId: number): Promise<Branding> {
    const row = await this.storage.db
      .selectFrom('branding')
      .select(['display_name', 'primary_color', 'accent_color', 'email_footer', 'logo_type', LOGO_BYTES.as('logo_bytes'), 'logo_sha256', 'logo_updated_at', 'updated_at'])
      .where('org_id', '=', orgId)
      .executeTakeFirst();
    if (!row) return describe(NONE, null, null);
    const logo = row.logo_type === null ? null : { content_type: row.logo_type, bytes: Number(row.logo_bytes), sha256: row.logo_sha256, updated_at: row.logo_updated_at };
    return describe(row, logo, row.updated_at);
  }

  /** Replaces the settings (the logo stays). */
  async put(orgId: number, settings: BrandingSettings, userId: number | null): Promise<Branding> {
    return this.upsert(orgId, { ...settings, updated_by: userId, updated_at: this.storage.now() });
  }

  /** Replaces the logo (the settings stay). */
  async putLogo(orgId: number, logo: Logo, userId: number | null): Promise<Branding> {
    const now = this.storage.now();
    const values = {
      logo_type: logo.type,
      logo_base64: logo.data.toString('base64'),
      logo_sha256: crypto.createHash('sha256').update(logo.data).digest('hex'),
      logo_updated_at: now,
      updated_by: userId,
      updated_at: now,
    };
    return this.upsert(orgId, values);
  }

  /** Sets these columns of the organization's row, making the row when it has none. */
  private async upsert(orgId: number, values: Record<string, unknown>): Promise<Branding> {
    await this.storage.db
      .insertInto('branding')
      .values({ org_id: orgId, ...values })
      .onConflict((oc) => oc.column('org_id').doUpdateSet(values))
      .execute();
    return this.get(orgId);
  }

  /** Removes the logo; false when there was none. */
  async deleteLogo(orgId: number, userId: number | null): Promise<boolean> {
    const result = await this.storage.db
      .updateTable('branding')
      .set({ logo_type: null, logo_base64: null, logo_sha256: null, logo_updated_at: null, updated_by: userId, updated_at: this.storage.now() })
      .where('org_id', '=', orgId)
      .where('logo_type', 'is not', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async logo(orgId: number): Promise<(Logo & { sha256: string }) | null> {
    const row = await this.storage.db.selectFrom('branding').select(['logo_type', 'logo_base64', 'logo_sha256']).where('org_id', '=', orgId).executeTakeFirst();
    if (!row || row.logo_type === null) return null;
    return { type: row.logo_type, data: Buffer.from(row.logo_base64, 'base64'), sha256: row.logo_sha256 };
  }
}

function describe(settings: BrandingSettings, logo: LogoInfo | null, updatedAt: string | null): Branding {
  return {
    display_name: settings.display_name,
    primary_color: settings.primary_color ?? DEFAULT_COLORS.primary_color,
    accent_color: settings.accent_color ?? DEFAULT_COLORS.accent_color,
    email_footer: settings.email_footer,
    logo,
    updated_at: updatedAt,
  };
}
