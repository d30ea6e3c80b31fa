import { base64url } from 'jose';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/upstream/oauth/box.js';

const enc = new TextEncoder();
const SECRET = enc.encode('a-deployment-secret-of-at-least-32-characters');
const LABEL = 'manifold/upstream-credentials/v1';
const AAD = 'github\0alice\0https://as.example.com';

function tamper(sealed: string, part: 1 | 2): string {
  const parts = sealed.split('.');
  const bytes = base64url.decode(parts[part] as string);
  bytes[0] = (bytes[0] ?? 0) ^ 1;
  parts[part] = base64url.encode(bytes);
  return parts.join('.');
}

describe('SecretBox', () => {
  it('round-trips JSON under the same AAD, as v1.<iv>.<ct> with a fresh IV each time', async () => {
    const box = await SecretBox.create(SECRET, LABEL);
    const value = { accessToken: 'at-123', refreshToken: 'rt-456', tokenType: 'Bearer', n: 1 };
    const a = await box.seal(value, AAD);
    const b = await box.seal(value, AAD);
    expect(a).toMatch(/^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain('at-123');
    expect(await box.open(a, AAD)).toEqual(value);
    expect(await box.open(b, AAD)).toEqual(value);
    expect(await box.open(await box.seal('text', ''), '')).toBe('text');
  });

  it('does not open under another AAD (a row copied to another key)', async () => {
    const box = await SecretBox.create(SECRET, LABEL);
    const sealed = await box.seal({ a: 1 }, AAD);
    expect(await box.open(sealed, 'github\0bob\0https://as.example.com')).toBeUndefined();
    expect(await box.open(sealed, '')).toBeUndefined();
  });

  it('does not open with another secret or another label', async () => {
    const sealed = await (await SecretBox.create(SECRET, LABEL)).seal({ a: 1 }, AAD);
    const otherSecret = await SecretBox.create(
      enc.encode('another-deployment-secret-of-32-characters'),
      LABEL,
    );
    const otherLabel = await SecretBox.create(SECRET, 'manifold/oauth-state/v1');
    expect(await otherSecret.open(sealed, AAD)).toBeUndefined();
    expect(await otherLabel.open(sealed, AAD)).toBeUndefined();
  });

  it('gives undefined for a tampered IV or ciphertext and for malformed text', async () => {
    const box = await SecretBox.create(SECRET, LABEL);
    const sealed = await box.seal({ a: 1 }, AAD);
    expect(await box.open(tamper(sealed, 1), AAD)).toBeUndefined();
    expect(await box.open(tamper(sealed, 2), AAD)).toBeUndefined();
    const [, iv, ct] = sealed.split('.');
    for (const bad of [
      '',
      'v1',
      'v1..',
      `v2.${iv}.${ct}`,
      `v1.${iv}`,
      `v1.${iv}.${ct}.x`,
      `v1.${iv}.${(ct as string).slice(0, 10)}`,
      `v1.${(iv as string).slice(2)}.${ct}`,
      `v1.!!!.${ct}`,
      `v1.${iv}.${'A'.repeat(70_000)}`,
      42 as unknown as string,
    ]) {
      expect(await box.open(bad, AAD)).toBeUndefined();
    }
  });

  it('refuses a short secret or an empty label when created', async () => {
    await expect(SecretBox.create(enc.encode('too-short'), LABEL)).rejects.toThrow(/at least 32 bytes/);
    await expect(SecretBox.create(SECRET, '')).rejects.toThrow(/label/);
  });
});
