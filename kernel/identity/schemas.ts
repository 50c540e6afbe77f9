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

export const idParam = (name: string) => z.object({ [name]: z.coerce.number().int().positive() });
