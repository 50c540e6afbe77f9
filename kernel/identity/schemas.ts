import { z } from 'zod';
import { ROLES } from './users.ts';

/** Wire shapes of the identity records the kernel owns, shared by the routers that show them. */
export const roleSchema = z.enum(ROLES).describe('Legacy flat role');

export const userSchema = z
  .object({
    user_id: z.number().int(),
    id: z.number().int(),
    username: z.string(),
    email: z.string(),
    role: z.string(),
    default_org_id: z.number().int().nullable(),
    must_reset_password: z.boolean(),
    is_active: z.boolean(),
    sessions_valid_after: z.string().nullable().describe('JWTs issued before this moment are refused (set when the password changes or is reset)'),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'User' });

export const organizationSchema = z.object({ id: z.number().int(), name: z.string(), created_at: z.string() }).meta({ id: 'Organization' });

export const groupSchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    name: z.string(),
    description: z.string().nullable(),
    capabilities: z.array(z.string()),
    created_at: z.string(),
  })
  .meta({ id: 'Group' });

export const tokenInfoSchema = z
  .object({
    id: z.number().int(),
    user_id: z.number().int(),
    username: z.string().optional(),
    name: z.string(),
    token_prefix: z.string().describe('First characters of the secret, to recognise it'),
    scopes: z.array(z.string()).nullable().describe('null = the owner\u2019s full permissions'),
    created_at: z.string(),
    expires_at: z.string().nullable().describe('null = never expires'),
    last_used_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
    state: z.enum(['active', 'revoked', 'expired']),
  })
  .meta({ id: 'PersonalAccessToken' });

export const accessTokenSchema = z
  .object({
    access_token: z.string(),
    token_type: z.literal('bearer'),
    expires_in: z.number().int().describe('Seconds'),
    must_reset_password: z.boolean(),
  })
  .meta({ id: 'AccessToken' });

export const statusMessageSchema = z.object({ status: z.string() }).meta({ id: 'StatusMessage' });

/** The largest record id: ids are 32-bit integers on Postgres (SQLite holds the same ones). */
export const MAX_ID = 2_147_483_647;

/**
 * A record id in a path (or a query): canonical decimal digits only, so `0x1`, ` 1`, `1e0`, `+1`,
 * `01` and `1.0` are refused (400 naming the parameter) rather than read as 1; from 1 to `MAX_ID`
 * (a larger one could not be compared with an id column on Postgres). Every id parameter is
 * declared with it (`idParam`, or as a field).
 */
export const pathId = z
  .string()
  .regex(/^(0|[1-9][0-9]*)$/, 'must be an id written in decimal digits only (no sign, spaces, leading zeros, exponent or fraction)')
  .transform(Number)
  .refine((id) => id > 0 && id <= MAX_ID, `must be a positive integer of at most ${MAX_ID}`)
  .meta({ type: 'integer', minimum: 1, maximum: MAX_ID });

/**
 * A name people give a record and read back (an API Service, a key, a recipe, a job, a model):
 * trimmed, 1 to 200 characters, no control character (it is shown in lists and logs).
 */
export const displayName = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[^\u0000-\u001f]*$/, 'must not hold control characters')
  // A JSON body is checked by the kernel already; a name read from a form field's JSON is not.
  .refine((name) => name.isWellFormed(), 'must be well-formed Unicode (no lone surrogate)');

/** A record id in a JSON body (a project, a dataset, a user…): from 1 to `MAX_ID`, as `pathId`. */
export const recordId = z.number().int().min(1).max(MAX_ID);

/** Path parameters holding one id, typed by its name: `idParam('id')` parses to `{ id: number }`. */
export const idParam = <K extends string>(name: K) => z.object({ [name]: pathId } as Record<K, typeof pathId>);
