import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Settings } from './config.ts';

export interface KernelSecrets {
  jwtSecret: string;
  patHashKey: string;
  /** Key of the vault that encrypts secrets at rest (connector passwords and tokens). */
  vaultKey: string;
}

const FILE = 'secrets.json';

/**
 * Secrets given in the settings win; any not given are generated once and kept in
 * `DATA_DIR/secrets.json` (mode 0600) so a restart keeps sessions and token hashes valid.
 */
export function resolveSecrets(settings: Settings): KernelSecrets {
  const file = path.join(settings.DATA_DIR, FILE);
  let stored: Partial<KernelSecrets> = {};
  if (fs.existsSync(file)) stored = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<KernelSecrets>;
  const generated: Partial<KernelSecrets> = {};
  const pick = (given: string | undefined, key: keyof KernelSecrets) => {
    if (given) return given;
    if (stored[key]) return stored[key]!;
    generated[key] = crypto.randomBytes(48).toString('base64url');
    return generated[key]!;
  };
  const secrets = {
    jwtSecret: pick(settings.JWT_SECRET, 'jwtSecret'),
    patHashKey: pick(settings.PAT_HASH_KEY, 'patHashKey'),
    vaultKey: pick(settings.VAULT_KEY, 'vaultKey'),
  };
  if (Object.keys(generated).length > 0) {
    fs.mkdirSync(settings.DATA_DIR, { recursive: true, mode: 0o700 });
    fs.writeFileSync(file, JSON.stringify({ ...stored, ...generated }, null, 2), { mode: 0o600 });
    fs.chmodSync(file, 0o600);
  }
  return secrets;
}
