import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadSettings } from '../../kernel/config.ts';
import { resolveSecrets } from '../../kernel/secrets.ts';
import { tempDir } from '../harness/index.ts';

describe('settings', () => {
  const temp = tempDir();
  afterEach(() => fs.rmSync(path.join(temp.dir, 'secrets.json'), { force: true }));

  it('has the documented defaults', () => {
    const settings = loadSettings({});
    expect(settings).toMatchObject({
      PORT: 8000,
      HOST: '127.0.0.1',
      DATA_DIR: './data',
      MANIFESTS_DIR: ['./manifests'],
      JWT_ALGORITHM: 'HS256',
      JWT_EXPIRE_MINUTES: 60,
      PAT_MAX_PER_USER: 20,
      PAT_RATE_LIMIT_PER_MIN: 0,
      CORS_ALLOWED_ORIGINS: [],
      IDP_ALLOWED_DOMAINS: [],
      CSV_MAX_FIELD_BYTES: 1024 * 1024,
      CSV_MAX_RECORD_BYTES: 4 * 1024 * 1024,
    });
    expect(settings.DATABASE_URL).toBeUndefined();
  });

  it('parses lists and several manifest folders', () => {
    const settings = loadSettings({ CORS_ALLOWED_ORIGINS: 'https://a.example, https://b.example', MANIFESTS_DIR: `./manifests${path.delimiter}/opt/plugins` });
    expect(settings.CORS_ALLOWED_ORIGINS).toEqual(['https://a.example', 'https://b.example']);
    expect(settings.MANIFESTS_DIR).toEqual(['./manifests', '/opt/plugins']);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['DATABASE_URL', 'mysql://db/x'],
    ['JWT_ALGORITHM', 'none'],
    ['JWT_EXPIRE_MINUTES', '0'],
    ['LOG_LEVEL', 'loud'],
    ['JWT_SECRET', 'short'],
    ['BODY_LIMIT', 'lots'],
    ['CSV_MAX_FIELD_BYTES', '0'],
    ['CSV_MAX_FIELD_BYTES', '1mb'],
  ])('names %s when it is invalid (%s)', (name, value) => {
    expect(() => loadSettings({ [name]: value })).toThrow(new RegExp(`^invalid setting ${name}: `));
  });

  it('checks answers against their schemas except in production, unless told', () => {
    expect(loadSettings({}).VALIDATE_RESPONSES).toBe(true);
    const production = { NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), PAT_HASH_KEY: 'y'.repeat(32), VAULT_KEY: 'z'.repeat(32) };
    expect(loadSettings(production).VALIDATE_RESPONSES).toBe(false);
    expect(loadSettings({ ...production, VALIDATE_RESPONSES: 'true' }).VALIDATE_RESPONSES).toBe(true);
  });

  it('requires the secrets in production', () => {
    expect(() => loadSettings({ NODE_ENV: 'production' })).toThrow('invalid setting JWT_SECRET: required when NODE_ENV=production');
    expect(() => loadSettings({ NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32) })).toThrow('invalid setting PAT_HASH_KEY');
    expect(() => loadSettings({ NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), PAT_HASH_KEY: 'y'.repeat(32) })).toThrow('invalid setting VAULT_KEY');
  });

  it('generates missing secrets once, 0600, and keeps them across restarts', () => {
    const settings = loadSettings({ DATA_DIR: temp.dir });
    const first = resolveSecrets(settings);
    const file = path.join(temp.dir, 'secrets.json');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(first.jwtSecret.length).toBeGreaterThanOrEqual(32);
    expect(new Set([first.jwtSecret, first.patHashKey, first.vaultKey]).size).toBe(3);
    expect(resolveSecrets(settings)).toEqual(first);
  });

  it('prefers given secrets over stored ones', () => {
    resolveSecrets(loadSettings({ DATA_DIR: temp.dir }));
    const given = 'g'.repeat(40);
    expect(resolveSecrets(loadSettings({ DATA_DIR: temp.dir, JWT_SECRET: given })).jwtSecret).toBe(given);
  });
});
