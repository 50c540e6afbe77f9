import { kernelServices, type ServiceType } from '../../kernel/plugin-api.ts';

/** The kernel services the auth router asks for. */
export const authDeps = {
  users: kernelServices.users,
  sessions: kernelServices.sessions,
  tokens: kernelServices.tokens,
  mail: kernelServices.mail,
  capabilities: kernelServices.capabilities,
  config: kernelServices.config,
  logger: kernelServices.logger,
};

export type AuthServices = { [K in keyof typeof authDeps]: ServiceType<(typeof authDeps)[K]> };
