/**
 * `manifold keys`: a signing key pair for issuing tokens with `manifold token`. The private JWK
 * goes to `signing-key.json` (mode 0600 from the moment it exists), the public one into
 * `jwks.json`, which `gateway.auth.jwksFile` points at.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';
import { ASYMMETRIC_ALGORITHMS } from '../../../src/config/defaults.js';
import { isObject } from '../../../src/lib/json.js';
import { type CliIO, CommandError, parseFlags, runCommand, UsageError } from './run.js';

export const KEYS_USAGE = `Usage: manifold keys --out DIR [--alg ES256] [--iss ISSUER] [--aud AUDIENCE] [--force]

Writes DIR/signing-key.json (the private key, mode 0600) and DIR/jwks.json (the public key set).
--alg is one of ${ASYMMETRIC_ALGORITHMS.join(', ')} (default ES256).
--iss and --aud only fill in the printed config snippet (defaults "manifold" and "manifold-gateway").
An existing signing-key.json is kept unless --force is given; an existing jwks.json keeps its keys
and gains the new one, so tokens signed with an older key verify until you remove it.`;

export const SIGNING_KEY_FILE = 'signing-key.json';
export const JWKS_FILE = 'jwks.json';

/** Writes `text` to a new file that has `mode` from creation; fails if `path` exists. */
function writeNew(path: string, text: string, mode: number): void {
  const fd = openSync(path, 'wx', mode);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

/** Replaces `path` atomically with a file created with `mode`. */
function replace(dir: string, path: string, text: string, mode: number): void {
  const tmp = join(dir, `.manifold-${randomBytes(6).toString('hex')}.tmp`);
  writeNew(tmp, text, mode);
  renameSync(tmp, path);
}

/** The public keys already in `path`, so that a new key is added rather than replacing them. */
function existingKeys(path: string): Record<string, unknown>[] {
  if (!existsSync(path)) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new CommandError(`${path} exists but is not valid JSON; move it away or choose another --out`);
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || !keys.every(isObject)) {
    throw new CommandError(
      `${path} exists but is not a key set ({"keys": [...]}); move it away or choose another --out`,
    );
  }
  return keys as Record<string, unknown>[];
}

/** Runs `manifold keys`; returns the exit code (2: usage, 1: refused or failed). */
export function runKeys(args: string[], io: CliIO): Promise<number> {
  return runCommand('keys', KEYS_USAGE, io, () => keys(args, io));
}

async function keys(args: string[], io: CliIO): Promise<number> {
  const { values } = parseFlags({
    args,
    allowPositionals: false,
    options: {
      out: { type: 'string', short: 'o' },
      alg: { type: 'string', default: 'ES256' },
      iss: { type: 'string', default: 'manifold' },
      aud: { type: 'string', default: 'manifold-gateway' },
      force: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    io.out(`${KEYS_USAGE}\n`);
    return 0;
  }
  const dir = values.out;
  if (dir === undefined || dir === '') throw new UsageError('--out DIR is required');
  const alg = values.alg;
  if (!(ASYMMETRIC_ALGORITHMS as readonly string[]).includes(alg)) {
    throw new UsageError(
      `--alg must be one of ${ASYMMETRIC_ALGORITHMS.join(', ')}` +
        (alg.startsWith('HS') ? '; for HS256 use a shared "secret" in gateway.auth instead' : ''),
    );
  }

  const created = !existsSync(dir);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new CommandError(`cannot create ${dir}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  if (!statSync(dir).isDirectory()) throw new CommandError(`${dir} is not a directory`);
  if (!created && (statSync(dir).mode & 0o077) !== 0) {
    io.err(`manifold keys: warning: ${dir} is accessible to other users; consider chmod 700 ${dir}\n`);
  }
  const keyPath = join(dir, SIGNING_KEY_FILE);
  const jwksPath = join(dir, JWKS_FILE);
  const kept = existingKeys(jwksPath);
  if (existsSync(keyPath) && !values.force) {
    throw new CommandError(
      `refusing to overwrite ${keyPath}; pass --force to replace it (its public key stays in ${JWKS_FILE} until you remove it)`,
    );
  }

  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
  const privateJwk: JWK = { ...(await exportJWK(privateKey)), kid, alg };
  const signingText = `${JSON.stringify(privateJwk, null, 2)}\n`;
  try {
    if (values.force) replace(dir, keyPath, signingText, 0o600);
    else writeNew(keyPath, signingText, 0o600);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST')
      throw new CommandError(`refusing to overwrite ${keyPath}; pass --force to replace it`);
    throw new CommandError(`cannot write ${keyPath}: ${code ?? String(e)}`);
  }
  const entry = { ...publicJwk, kid, alg, use: 'sig' };
  const jwks = { keys: [...kept.filter((k) => k.kid !== kid), entry] };
  replace(dir, jwksPath, `${JSON.stringify(jwks, null, 2)}\n`, 0o644);

  const snippet = `"auth": {"issuer": ${JSON.stringify(values.iss)}, "audience": ${JSON.stringify(values.aud)}, "jwksFile": ${JSON.stringify(jwksPath)}}`;
  const previous =
    kept.length === 0
      ? ''
      : ` (added to the ${kept.length} key${kept.length === 1 ? '' : 's'} already there; remove old keys once the tokens signed with them have expired)`;
  io.out(
    [
      `Private signing key: ${keyPath} (mode 0600; keep it secret and out of manifold.json)`,
      `Public key set:      ${jwksPath} (kid ${kid}, alg ${alg})${previous}`,
      '',
      'Add this to the "gateway" section of manifold.json (jwksFile is relative to the directory manifold runs in):',
      '',
      `  ${snippet}`,
      '',
      'Then issue a token for each tenant, for example:',
      '',
      `  manifold token --key ${keyPath} --iss ${JSON.stringify(values.iss)} --aud ${JSON.stringify(values.aud)} --sub acme --grant 'github__*'`,
      '',
    ].join('\n'),
  );
  return 0;
}
