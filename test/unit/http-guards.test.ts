import { describe, expect, it } from 'vitest';
import { ManifoldError } from '../../src/errors.js';
import { hostAllowed, originCheck } from '../../src/server/http/guards.js';

const request = (headers: Record<string, string>) => ({
  header: (name: string) => headers[name],
});

function refusal(f: () => void): string | undefined {
  try {
    f();
    return undefined;
  } catch (e) {
    expect(e).toBeInstanceOf(ManifoldError);
    return (e as ManifoldError).code;
  }
}

describe('originCheck (DNS rebinding, SECURITY B3)', () => {
  it('a Host remembered as allowed opens nothing else: foreign hosts and origins are still refused', () => {
    const check = originCheck({ allowedOrigins: [], hostnames: ['gw.example.com'], checkHost: true });
    expect(refusal(() => check(request({ host: '127.0.0.1:8787' })))).toBeUndefined();
    expect(refusal(() => check(request({ host: '127.0.0.1:8787' })))).toBeUndefined();
    expect(refusal(() => check(request({ host: 'rebind.evil.example:8787' })))).toBe('ERR_HOST');
    // The same allowed Host with a foreign Origin: the origin is checked on every request.
    expect(refusal(() => check(request({ host: '127.0.0.1:8787', origin: 'https://evil.example' })))).toBe(
      'ERR_ORIGIN',
    );
    expect(refusal(() => check(request({ host: 'GW.example.com' })))).toBeUndefined();
    expect(refusal(() => check(request({})))).toBe('ERR_HOST');
    expect(refusal(() => check(request({ host: 'gw.example.com.evil.example' })))).toBe('ERR_HOST');
    expect(refusal(() => check(request({ host: 'GW.example.com' })))).toBeUndefined();
  });

  it('two Host headers (joined "a, b") are refused even when the first is allowed', () => {
    const check = originCheck({ allowedOrigins: [], hostnames: ['gw.example.com'], checkHost: true });
    expect(refusal(() => check(request({ host: '127.0.0.1:8787, evil.example' })))).toBe('ERR_HOST');
    expect(refusal(() => check(request({ host: 'gw.example.com, gw.example.com' })))).toBe('ERR_HOST');
    expect(refusal(() => check(request({ host: 'gw.example.com' })))).toBeUndefined();
    expect(hostAllowed('127.0.0.1:8787, evil.example', [])).toBe(false);
    expect(hostAllowed('127.0.0.1:8787', [])).toBe(true);
  });
});
