/**
 * `manifold token`: signs one access token with a key from `manifold keys`. Grants travel in the
 * standard `scope` claim (RFC 8693 §4.2, RFC 9068 §2.2.3) as `tools:<pattern>` entries.
 * Only the JWT is written to stdout, so `TOKEN=$(manifold token ...)` works.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { importJWK, type JWK, SignJWT } from 'jose';
import { ASYMMETRIC_ALGORITHMS } from '../../../src/config/defaults.js';
import { isObject } from '../../../src/lib/json.js';
import { type CliIO, CommandError, parseFlags, runCommand, UsageError } from './run.js';

export const TOKEN_USAGE = `Usage: manifold token --key DIR/signing-key.json --iss ISSUER --aud AUDIENCE --sub SUBJECT
                      --grant PATTERN [--grant PATTERN ...] [--ttl 1h] [--tenant TENANT] [--admin]

Prints one signed JWT. Each --grant is a glob over exposed tool names (e.g. 'github__*'), sent as
the scope entry tools:PATTERN; 'risk:read' grants every tool classified read, and 'prompts:GLOB' and
'resources:GLOB' grant prompts and resources; those three are sent as they are. --admin adds the scope manifold:admin (health detail at /healthz, and the metrics).
--ttl is a number followed by s, m, h or d (default 1h, at most 365d). --tenant sets a "tenant"
claim, for a gateway configured with "tenantClaim": "tenant"; otherwise the tenant is --sub.`;

const TTL_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };
const MAX_TTL_SECONDS = 365 * 86_400;
/** A scope token is 1*( %x21 / %x23-5B / %x5D-7E ) (RFC 6749 §3.3). */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/** `30s`, `15m`, `1h`, `7d` -> seconds. */
export function parseTtl(text: string): number | undefined {
  const match = /^([1-9][0-9]{0,8})([smhd])$/.exec(text);
  if (!match) return undefined;
  const seconds = Number(match[1]) * TTL_UNITS[match[2]!]!;
  return seconds <= MAX_TTL_SECONDS ? seconds : undefined;
}

/** Reads a private JWK written by `manifold keys`. Messages never quote the file. */
function readSigningKey(path: string, io: CliIO): JWK & { alg: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new CommandError(
      code === 'ENOENT'
        ? `key file not found: ${path} (create one with manifold keys --out DIR)`
        : `cannot read ${path}: ${code ?? String(e)}`,
    );
  }
  let jwk: unknown;
  try {
    jwk = JSON.parse(text);
  } catch {
    throw new CommandError(`${path} is not valid JSON; pass the signing-key.json written by manifold keys`);
  }
  const key = jwk as Partial<JWK> | null;
  if (!isObject(key) || typeof key.kty !== 'string') {
    throw new CommandError(`${path} is not a JWK; pass the signing-key.json written by manifold keys`);
  }
  if (typeof key.d !== 'string') {
    throw new CommandError(`${path} holds no private key (is it jwks.json?); pass signing-key.json`);
  }
  if (typeof key.alg !== 'string' || !(ASYMMETRIC_ALGORITHMS as readonly string[]).includes(key.alg)) {
    throw new CommandError(`${path} has no supported "alg"; create a new key with manifold keys`);
  }
  if ((statSync(path).mode & 0o077) !== 0) {
    io.err(`manifold token: warning: ${path} is readable by other users; run chmod 600 ${path}\n`);
  }
  return key as JWK & { alg: string };
}

/** Runs `manifold token`; returns the exit code (2: usage, 1: key problems). */
export function runToken(args: string[], io: CliIO): Promise<number> {
  return runCommand('token', TOKEN_USAGE, io, () => token(args, io));
}

async function token(args: string[], io: CliIO): Promise<number> {
  const { values } = parseFlags({
    args,
    allowPositionals: false,
    options: {
      key: { type: 'string', short: 'k' },
      iss: { type: 'string' },
      aud: { type: 'string' },
      sub: { type: 'string' },
      grant: { type: 'string', multiple: true, short: 'g' },
      ttl: { type: 'string', default: '1h' },
      tenant: { type: 'string' },
      admin: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    io.out(`${TOKEN_USAGE}\n`);
    return 0;
  }
  const missing = (['key', 'iss', 'aud', 'sub'] as const).filter((k) => !values[k]).map((k) => `--${k}`);
  const grants = values.grant ?? [];
  if (grants.length === 0 && !values.admin) missing.push('--grant');
  if (missing.length > 0) throw new UsageError(`missing ${missing.join(', ')}`);
  for (const g of grants) {
    if (g.startsWith('tools:')) {
      throw new UsageError(`--grant takes the pattern without "tools:" (write --grant '${g.slice(6)}')`);
    }
    if (!SCOPE_TOKEN.test(g)) {
      throw new UsageError('--grant must be a non-empty pattern without spaces, quotes or backslashes');
    }
  }
  if (values.tenant === '') throw new UsageError('--tenant must not be empty');
  const ttl = parseTtl(values.ttl);
  if (ttl === undefined) {
    throw new UsageError(
      '--ttl must be a positive number followed by s, m, h or d, at most 365d (e.g. 15m, 1h, 7d)',
    );
  }

  const jwk = readSigningKey(values.key!, io);
  let key: Awaited<ReturnType<typeof importJWK>>;
  try {
    key = await importJWK(jwk, jwk.alg);
  } catch {
    throw new CommandError(
      `${values.key} is not a usable ${jwk.alg} private key; create a new one with manifold keys`,
    );
  }
  // Grants of another kind (prompts:, resources:) and risk classes (risk:read) name themselves.
  const scope = [...new Set(grants)].map((g) => (/^(prompts|resources|risk):./.test(g) ? g : `tools:${g}`));
  if (values.admin) scope.push('manifold:admin');
  const claims: Record<string, unknown> = { scope: scope.join(' ') };
  if (values.tenant !== undefined) claims.tenant = values.tenant;
  const now = Math.floor(Date.now() / 1000);
  const jwt = await new SignJWT(claims)
    .setProtectedHeader({ alg: jwk.alg, ...(typeof jwk.kid === 'string' ? { kid: jwk.kid } : {}) })
    .setIssuer(values.iss!)
    .setAudience(values.aud!)
    .setSubject(values.sub!)
    .setIssuedAt(now)
    .setNotBefore(now)
    .setExpirationTime(now + ttl)
    .setJti(randomUUID())
    .sign(key);
  io.out(`${jwt}\n`);
  return 0;
}
