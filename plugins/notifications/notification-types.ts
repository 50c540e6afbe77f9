/** The kinds of notification, what each is about and the channels a user has until they choose. */
export const NOTIFICATION_TYPES: Record<string, { description: string; in_app: boolean; email: boolean }> = {
  'run.failed': { description: 'A run you started failed (a recipe, a build, a job, a training)', in_app: true, email: false },
  'scenario.failed': { description: 'A scenario run you started (or that acts for you) failed', in_app: true, email: true },
  'schema.drift.breaking': { description: 'A scenario of yours found a breaking schema drift (a column removed or retyped)', in_app: true, email: false },
  'quality.rule.failed': { description: 'A data-quality rule of severity error failed in a run of yours', in_app: true, email: false },
  'token.expiring': { description: 'A personal access token of yours expires within 7 days, then within 1 day', in_app: true, email: true },
  'token.revoked': { description: 'An administrator revoked a personal access token of yours', in_app: true, email: true },
  'api_key.expiring': { description: 'A data API key you minted expires within 7 days, then within 1 day', in_app: true, email: true },
  'dashboard.published': { description: 'A dashboard you created was published as a share link', in_app: true, email: false },
  'llm.quota.alert': { description: 'An LLM cost quota of an organization you administer crossed one of its alert thresholds', in_app: true, email: true },
};

export type NotificationType = keyof typeof NOTIFICATION_TYPES;
