import { compileParams, OfferedContributions, type Contribution, type Disposable, type FieldError, type PluginEnablementService } from '../../kernel/plugin-api.ts';
import type { CardTypeContribution, JsonSchema } from './public.ts';

/** A card type offered in an organization, its config schema compiled. */
export interface OfferedCardType {
  id: string;
  pluginId: string;
  description: string | null;
  config: JsonSchema;
  contribution: CardTypeContribution;
  /** Where `config` fails the type's schema, as field errors under `location`; empty when valid. */
  checkConfig(config: unknown, location: string): FieldError[];
}

/** The card types contributed to `dashboards.card-types`: a config schema that does not compile refuses one. */
export class CardTypes {
  private readonly types: OfferedContributions<OfferedCardType>;

  constructor(ownerId: string, enablement: PluginEnablementService) {
    this.types = new OfferedContributions(ownerId, enablement);
  }

  accept({ value, pluginId }: Contribution<CardTypeContribution>): Disposable {
    const checkConfig = compileParams(`card type "${value.type}"`, value.config);
    return this.types.add({ id: value.type, pluginId, description: value.description ?? null, config: value.config, contribution: value, checkConfig });
  }

  /** The types offered in the organization as the API lists them. */
  async described(orgId: number | null) {
    return (await this.types.list(orgId)).map((t) => ({ type: t.id, plugin_id: t.pluginId, description: t.description, config: t.config }));
  }

  get(orgId: number, type: string): Promise<OfferedCardType | undefined> {
    return this.types.get(orgId, type);
  }
}
