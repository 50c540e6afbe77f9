import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';

/** The claims an identity provider's ID token carries that the kernel checks. */
export interface IdTokenClaims {
  iss: string;
  aud: string;
  email?: string;
  email_verified?: boolean | string;
  /** Unix seconds. */
  exp: number;
  sub?: string;
}

export interface SignOptions {
  /** `published` (default): the key the JWKS serves; `foreign`: a key the JWKS does not hold. */
  key?: 'published' | 'foreign';
  /** The `kid` header; defaults to the published key's id (so a foreign key fails on the signature). */
  kid?: string;
}

/**
 * A stand-in for an identity provider's key endpoint: a real HTTP server on loopback serving a
 * JWKS at `/jwks` with one RS256 public key, and a signer for ID tokens with that key (or with a
 * foreign key that is not published).
 */
export interface JwksServer {
  url: string;
  jwksUrl: string;
  kid: string;
  /** How many times the JWKS was fetched. */
  fetches: number;
  signIdToken(claims: IdTokenClaims, options?: SignOptions): Promise<string>;
  close(): Promise<void>;
}

export async function startJwksServer(): Promise<JwksServer> {
  const kid = `test-key-${Date.now().toString(36)}`;
  const published = await generateKeyPair('RS256', { extractable: true });
  const foreign = await generateKeyPair('RS256', { extractable: true });
  const publicJwk: JWK = { ...(await exportJWK(published.publicKey)), kid, alg: 'RS256', use: 'sig' };
  const body = JSON.stringify({ keys: [publicJwk] });

  let fetches = 0;
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/jwks') {
      fetches += 1;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(body);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    jwksUrl: `${url}/jwks`,
    kid,
    get fetches() {
      return fetches;
    },
    async signIdToken(claims, options = {}) {
      const { iss, aud, exp, sub, ...rest } = claims;
      const key: CryptoKey = options.key === 'foreign' ? foreign.privateKey : published.privateKey;
      return new SignJWT({ ...rest })
        .setProtectedHeader({ alg: 'RS256', kid: options.kid ?? kid, typ: 'JWT' })
        .setIssuer(iss)
        .setAudience(aud)
        .setSubject(sub ?? claims.email ?? 'subject')
        .setIssuedAt(Math.min(exp, Math.floor(Date.now() / 1000)) - 60)
        .setExpirationTime(exp)
        .sign(key);
    },
    close() {
      return new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      });
    },
  };
}
