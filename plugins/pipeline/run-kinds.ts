import { OfferedContributions, type Contribution, type Disposable, type PluginEnablementService } from '../../kernel/plugin-api.ts';
import type { RunKindContribution } from './public.ts';

/** A contributed kind of run as offered in an organization. */
export interface OfferedRunKind {
  id: string;
  pluginId: string;
  execute: RunKindContribution['execute'];
}

/** The kinds of run contributed to `pipeline.run-kinds`, offered where their plugin is enabled. */
export class RunKinds {
  private readonly kinds: OfferedContributions<OfferedRunKind>;

  constructor(ownerId: string, enablement: PluginEnablementService) {
    this.kinds = new OfferedContributions(ownerId, enablement);
  }

  accept({ value, pluginId }: Contribution<RunKindContribution>): Disposable {
    return this.kinds.add({ id: value.kind, pluginId, execute: value.execute });
  }

  /** Whether a plugin contributes the kind, enabled anywhere or not (past runs of it stay listed). */
  async known(kind: string): Promise<boolean> {
    return (await this.kinds.list(null)).some((k) => k.id === kind);
  }

  get(orgId: number, kind: string): Promise<OfferedRunKind | undefined> {
    return this.kinds.get(orgId, kind);
  }
}
