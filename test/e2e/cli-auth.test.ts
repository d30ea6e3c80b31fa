import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureDist } from '../helpers/dist.js';

const ISS = 'https://issuer.example';
const AUD = 'manifold-test';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let dir: string;

function manifold(args: string[]): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: dir, encoding: 'utf8', timeout: 20_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const mode = (path: string) => statSync(join(dir, path)).mode & 0o777;
const readJson = (path: string) => JSON.parse(readFileSync(join(dir, path), 'utf8'));

beforeAll(() => {
  ensureDist();
  dir = mkdtempSync(join(tmpdir(), 'manifold-cli-auth-'));
}, 150_000);
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('manifold keys and manifold token, as docs/auth.md runs them', () => {
  let snippet: Record<string, unknown>;

  it('keys writes a 0600 private key and a public key set into a new 0700 directory', () => {
    const r = manifold(['keys', '--out', 'keys', '--iss', ISS, '--aud', AUD]);
    expect(r.code, r.stderr).toBe(0);
    expect(mode('keys')).toBe(0o700);
    expect(mode('keys/signing-key.json')).toBe(0o600);
    const signing = readJson('keys/signing-key.json');
    expect(signing).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256' });
    expect(typeof signing.d).toBe('string');
    const jwks = readJson('keys/jwks.json');
    expect(jwks.keys).toHaveLength(1);
    const [pub] = jwks.keys;
    expect(pub).toMatchObject({ kid: signing.kid, alg: 'ES256', use: 'sig', kty: 'EC' });
    for (const member of ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k']) expect(pub).not.toHaveProperty(member);
    // The output names both files and gives the config snippet, never the private key.
    expect(r.stdout).toContain(join('keys', 'signing-key.json'));
    expect(r.stdout).toContain(join('keys', 'jwks.json'));
    expect(r.stdout + r.stderr).not.toContain(signing.d);
    const line = r.stdout.split('\n').find((l) => l.trim().startsWith('"auth":'));
    expect(line).toBeDefined();
    snippet = JSON.parse(`{${line}}`).auth;
    expect(snippet).toEqual({ issuer: ISS, audience: AUD, jwksFile: join('keys', 'jwks.json') });
  });

  it('the printed snippet loads: manifold check accepts it on a public address', () => {
    writeFileSync(
      join(dir, 'manifold.json'),
      JSON.stringify({
        mcpServers: { off: { command: 'none', disabled: true } },
        gateway: { host: '0.0.0.0', auth: snippet },
      }),
    );
    const r = manifold(['check']);
    expect(r.code, r.stderr).toBe(0);
  });

  it('token prints one JWT that verifies against jwks.json, with grants in scope', async () => {
    const r = manifold([
      'token',
      '--key',
      'keys/signing-key.json',
      '--iss',
      ISS,
      '--aud',
      AUD,
      '--sub',
      'acme',
      '--grant',
      'a__*',
      '--grant',
      'b__x',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    const jwt = r.stdout.trim();
    const jwks = createLocalJWKSet(readJson('keys/jwks.json') as JSONWebKeySet);
    const { payload, protectedHeader } = await jwtVerify(jwt, jwks, { issuer: ISS, audience: AUD });
    expect(payload.scope).toBe('tools:a__* tools:b__x');
    expect(payload.sub).toBe('acme');
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(payload.nbf).toBe(payload.iat);
    expect(typeof payload.jti).toBe('string');
    expect(protectedHeader).toEqual({ alg: 'ES256', kid: readJson('keys/signing-key.json').kid });
    expect(r.stderr).not.toContain(readJson('keys/signing-key.json').d);
  });

  it('token: --ttl, --tenant and --admin', () => {
    const r = manifold([
      'token',
      '--key',
      'keys/signing-key.json',
      '--iss',
      ISS,
      '--aud',
      AUD,
      '--sub',
      'ops',
      '--grant',
      '*',
      '--ttl',
      '15m',
      '--tenant',
      'internal',
      '--admin',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const payload = decodeJwt(r.stdout.trim());
    expect(payload.scope).toBe('tools:* manifold:admin');
    expect(payload.tenant).toBe('internal');
    expect(payload.exp! - payload.iat!).toBe(900);
    expect(decodeProtectedHeader(r.stdout.trim()).alg).toBe('ES256');
  });

  it('keys refuses to overwrite the signing key without --force; --force keeps the old public key', () => {
    const before = readFileSync(join(dir, 'keys/signing-key.json'), 'utf8');
    const refused = manifold(['keys', '--out', 'keys']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('refusing to overwrite');
    expect(refused.stderr).toContain('--force');
    expect(readFileSync(join(dir, 'keys/signing-key.json'), 'utf8')).toBe(before);

    const forced = manifold(['keys', '--out', 'keys', '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(mode('keys/signing-key.json')).toBe(0o600);
    const kid = readJson('keys/signing-key.json').kid;
    expect(kid).not.toBe(JSON.parse(before).kid);
    expect(readJson('keys/jwks.json').keys.map((k: { kid: string }) => k.kid)).toEqual([
      JSON.parse(before).kid,
      kid,
    ]);
    expect(readdirSync(join(dir, 'keys')).sort()).toEqual(['jwks.json', 'signing-key.json']);
  });

  it('usage errors exit 2 with the usage text and print no token', () => {
    const base = ['token', '--key', 'keys/signing-key.json', '--iss', ISS, '--aud', AUD, '--sub', 'acme'];
    for (const args of [
      [...base, '--grant', 'a__*', '--ttl', '10x'],
      [...base, '--grant', 'a__*', '--ttl', '0s'],
      [...base],
      ['token', '--iss', ISS, '--grant', 'a__*'],
      [...base, '--grant', 'tools:a__*'],
      [...base, '--grant', 'a b'],
      ['keys'],
      ['keys', '--out', 'k2', '--alg', 'HS256'],
      ['keys', '--out', 'k2', '--bogus'],
    ]) {
      const r = manifold(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('Usage: manifold');
    }
    expect(existsSync(join(dir, 'k2'))).toBe(false);
  });

  it('a key file that is not a private key is refused without echoing it', () => {
    const pub = readJson('keys/jwks.json').keys[0];
    writeFileSync(join(dir, 'public-key.json'), JSON.stringify(pub));
    const common = ['--iss', ISS, '--aud', AUD, '--sub', 'a', '--grant', 'x'];
    const r = manifold(['token', '--key', 'public-key.json', ...common]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('holds no private key');
    expect(r.stderr).not.toContain(pub.x);
    const set = manifold(['token', '--key', 'keys/jwks.json', ...common]);
    expect(set.code).toBe(1);
    expect(set.stderr).toContain('is not a JWK');
    expect(set.stderr).not.toContain(pub.x);
  });

  it('serve refuses --host 0.0.0.0 when the config has no auth', () => {
    writeFileSync(
      join(dir, 'open.json'),
      JSON.stringify({ mcpServers: { off: { command: 'x', disabled: true } } }),
    );
    const r = manifold(['serve', '--config', 'open.json', '--host', '0.0.0.0', '--port', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('gateway.auth');
    expect(r.stderr).toContain('"auth": false');
  });
});
