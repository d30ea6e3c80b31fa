import { describe, expect, it } from 'vitest';
import { ADMIN_SCOPE, extractBearer, grantsMatcher, principalFromClaims } from '../../src/auth/grants.js';
import { anonymousPrincipal, type Principal } from '../../src/auth/principal.js';
import type { AuthConfig } from '../../src/config/types.js';
import { ManifoldError } from '../../src/errors.js';
import { principal as made } from '../helpers/factories.js';

function authConfig(over: Partial<AuthConfig> = {}): AuthConfig {
  return {
    issuer: 'https://issuer.example',
    audience: 'https://gateway.example/mcp',
    clockToleranceSeconds: 30,
    maxTokenLifetimeSeconds: 86_400,
    tokenTypes: ['JWT', 'at+jwt'],
    tenantClaim: 'sub',
    tenants: {},
    authorizationServers: [],
    jwksCooldownSeconds: 30,
    jwksTimeoutMs: 5000,
    secret: 'x'.repeat(32),
    ...over,
  };
}

function unauthorized(fn: () => unknown, reason: string): void {
  let thrown: unknown;
  try {
    fn();
  } catch (e) {
    thrown = e;
  }
  expect(thrown).toBeInstanceOf(ManifoldError);
  expect((thrown as ManifoldError).code).toBe('ERR_UNAUTHORIZED');
  expect((thrown as ManifoldError).publicMessage).toBe('invalid token');
  expect((thrown as ManifoldError).data?.reason).toBe(reason);
}

const request = (headers: Record<string, string> = {}, url = 'https://gateway.example/mcp') =>
  new Request(url, { headers });

describe('extractBearer', () => {
  it('reads the Authorization header; the scheme is case-insensitive', () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      expect(extractBearer(request({ authorization: `${scheme} abc.def-ghi_jkl~+/==` }))).toEqual({
        token: 'abc.def-ghi_jkl~+/==',
        presented: true,
      });
    }
    // RFC 6750 §2.1 allows one or more spaces after the scheme; Headers trims the ends.
    expect(extractBearer(request({ authorization: '  Bearer   tok  ' }))).toEqual({
      token: 'tok',
      presented: true,
    });
    expect(extractBearer(request({ Authorization: 'Bearer tok' }))).toEqual({
      token: 'tok',
      presented: true,
    });
  });

  it('A3: a token in the query string is ignored', () => {
    const url = 'https://gateway.example/mcp?access_token=abc&token=abc&authorization=Bearer%20abc';
    expect(extractBearer(request({}, url))).toEqual({ presented: false });
    // Even alongside a header, only the header counts.
    expect(extractBearer(request({ authorization: 'Bearer fromheader' }, url))).toEqual({
      token: 'fromheader',
      presented: true,
    });
  });

  it('no header: not presented', () => {
    expect(extractBearer(request())).toEqual({ presented: false });
    expect(extractBearer(request({ cookie: 'access_token=abc' }))).toEqual({ presented: false });
  });

  it('malformed headers: presented, no token', () => {
    for (const value of [
      '',
      'Bearer',
      'Bearer ',
      'Bearertok',
      'Basic dXNlcjpwYXNz',
      'Token abc',
      'Bearer a b',
      'Bearer a,b',
      'Bearer abc, Bearer def',
      'Bearer =abc',
      'Bearer a=b',
      'Bearer "abc"',
      'Bearer\tabc',
      'Bearer é',
      'DPoP abc',
    ]) {
      expect(extractBearer(request({ authorization: value })), value).toEqual({ presented: true });
    }
  });

  it('two Authorization headers are malformed', () => {
    const headers = new Headers();
    headers.append('authorization', 'Bearer one');
    headers.append('authorization', 'Bearer two');
    expect(extractBearer(new Request('https://gateway.example/mcp', { headers }))).toEqual({
      presented: true,
    });
  });
});

describe('principalFromClaims', () => {
  it('scope as a space-delimited string: tools:<pattern> entries are grants, others ignored', () => {
    const p = principalFromClaims(
      { sub: 'u1', scope: 'openid  tools:github__* email tools:fs__read_? tools: tools:github__*' },
      authConfig(),
    );
    expect(p.subject).toBe('u1');
    expect(p.tenant).toBe('u1');
    expect(p.grants).toEqual(['fs__read_?', 'github__*']);
    expect(p.admin).toBe(false);
    expect(p.cap).toBeUndefined();
  });

  it('scope as an array', () => {
    const p = principalFromClaims(
      { sub: 'u1', scope: ['tools:a__*', 'tools:b__x', 42, 'other'] },
      authConfig(),
    );
    expect(p.grants).toEqual(['a__*', 'b__x']);
  });

  it('no scope, or a scope of another type: no grants', () => {
    expect(principalFromClaims({ sub: 'u1' }, authConfig()).grants).toEqual([]);
    expect(principalFromClaims({ sub: 'u1', scope: { tools: '*' } }, authConfig()).grants).toEqual([]);
  });

  it('grantsClaim: that claim holds an array of patterns; anything else grants nothing', () => {
    const auth = authConfig({ grantsClaim: 'manifold_tools' });
    expect(
      principalFromClaims({ sub: 'u1', manifold_tools: ['a__*', 'b', 7, ''], scope: 'tools:zzz' }, auth)
        .grants,
    ).toEqual(['a__*', 'b']);
    expect(principalFromClaims({ sub: 'u1', manifold_tools: 'a__*' }, auth).grants).toEqual([]);
    expect(principalFromClaims({ sub: 'u1', scope: 'tools:*' }, auth).grants).toEqual([]);
  });

  it('grantsClaim: entries with the tools: prefix (Auth0 permissions) are the same grants', () => {
    const auth = authConfig({ grantsClaim: 'permissions' });
    expect(
      principalFromClaims(
        { sub: 'u1', permissions: ['tools:github__*', 'memory__read_graph', 'tools:'] },
        auth,
      ).grants,
    ).toEqual(['github__*', 'memory__read_graph']);
  });

  it('admin scope, from either scope form and alongside grantsClaim', () => {
    expect(ADMIN_SCOPE).toBe('manifold:admin');
    expect(principalFromClaims({ sub: 'u1', scope: 'tools:* manifold:admin' }, authConfig()).admin).toBe(
      true,
    );
    expect(principalFromClaims({ sub: 'u1', scope: ['manifold:admin'] }, authConfig()).admin).toBe(true);
    expect(
      principalFromClaims({ sub: 'u1', scope: 'manifold:admin', g: ['x'] }, authConfig({ grantsClaim: 'g' }))
        .admin,
    ).toBe(true);
    expect(principalFromClaims({ sub: 'u1', scope: 'manifold:administrator' }, authConfig()).admin).toBe(
      false,
    );
    expect(principalFromClaims({ sub: 'u1', manifold_admin: true }, authConfig()).admin).toBe(false);
  });

  it('tenantClaim names the tenant; it must be a non-empty string', () => {
    const auth = authConfig({ tenantClaim: 'org' });
    expect(principalFromClaims({ sub: 'u1', org: 'acme' }, auth).tenant).toBe('acme');
    unauthorized(() => principalFromClaims({ sub: 'u1' }, auth), 'missing tenant claim');
    unauthorized(() => principalFromClaims({ sub: 'u1', org: '' }, auth), 'missing tenant claim');
    unauthorized(() => principalFromClaims({ sub: 'u1', org: ['acme'] }, auth), 'missing tenant claim');
    unauthorized(() => principalFromClaims({ sub: 'u1', org: 5 }, auth), 'missing tenant claim');
  });

  it('sub is required', () => {
    unauthorized(() => principalFromClaims({ scope: 'tools:*' }, authConfig()), 'missing sub');
    unauthorized(() => principalFromClaims({ sub: '' }, authConfig()), 'missing sub');
    unauthorized(() => principalFromClaims({ sub: 1 as never }, authConfig()), 'missing sub');
  });

  it('the tenant cap comes from config, own properties only', () => {
    const auth = authConfig({
      tenantClaim: 'org',
      tenants: { acme: { grants: ['github__*', 'fs__read'] }, open: { callsPerMinute: 5 } },
    });
    expect(principalFromClaims({ sub: 'u1', org: 'acme' }, auth).cap).toEqual(['fs__read', 'github__*']);
    expect(principalFromClaims({ sub: 'u1', org: 'open' }, auth).cap).toBeUndefined();
    expect(principalFromClaims({ sub: 'u1', org: 'unknown' }, auth).cap).toBeUndefined();
    for (const org of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      expect(principalFromClaims({ sub: 'u1', org }, auth).cap).toBeUndefined();
    }
  });

  it('key is tenant + subject; viewKey adds what the caller can see; neither can collide by concatenation', () => {
    const auth = authConfig({ tenantClaim: 'org', tenants: { a: { grants: ['x'] } } });
    const p1 = principalFromClaims({ sub: 'u1', org: 'a', scope: 'tools:b tools:a' }, auth);
    const p2 = principalFromClaims({ sub: 'u1', org: 'a', scope: 'tools:a tools:b' }, auth);
    expect(p1.key).toBe(p2.key);
    expect(p1.viewKey).toBe(p2.viewKey); // grants are sorted
    const p3 = principalFromClaims({ sub: 'u1', org: 'a', scope: 'tools:a' }, auth);
    expect(p3.key).toBe(p1.key);
    expect(p3.viewKey).not.toBe(p1.viewKey);
    // "a" + "bc" vs "ab" + "c".
    const q1 = principalFromClaims({ sub: 'bc', org: 'a' }, auth);
    const q2 = principalFromClaims({ sub: 'c', org: 'ab' }, auth);
    expect(q1.key).not.toBe(q2.key);
    expect(q1.viewKey).not.toBe(q2.viewKey);
    // The same subject in another tenant is another principal.
    expect(principalFromClaims({ sub: 'u1', org: 'b' }, auth).key).not.toBe(p1.key);
    // A different cap for the same tenant (config change) is a different view.
    const capped = principalFromClaims(
      { sub: 'u1', org: 'a', scope: 'tools:b tools:a' },
      authConfig({ tenantClaim: 'org', tenants: { a: { grants: ['y'] } } }),
    );
    expect(capped.viewKey).not.toBe(p1.viewKey);
  });

  it('shareKey (#18) is what the caller sees without who it is: the same for two subjects, not across tenants, grants, caps or admin', () => {
    const auth = authConfig({ tenantClaim: 'org', tenants: { a: { grants: ['x'] } } });
    const u1 = principalFromClaims({ sub: 'u1', org: 'a', scope: 'tools:b tools:a' }, auth);
    const u2 = principalFromClaims({ sub: 'u2', org: 'a', scope: 'tools:a tools:b' }, auth);
    expect(u1.viewKey).not.toBe(u2.viewKey);
    expect(u1.shareKey).toBe(u2.shareKey);
    for (const other of [
      principalFromClaims({ sub: 'u1', org: 'b', scope: 'tools:a tools:b' }, auth),
      principalFromClaims({ sub: 'u1', org: 'a', scope: 'tools:a' }, auth),
      principalFromClaims({ sub: 'u1', org: 'a', scope: 'tools:a tools:b manifold:admin' }, auth),
      principalFromClaims(
        { sub: 'u1', org: 'a', scope: 'tools:a tools:b' },
        authConfig({ tenantClaim: 'org', tenants: { a: { grants: ['y'] } } }),
      ),
    ]) {
      expect(other.shareKey).not.toBe(u1.shareKey);
    }
    // "a" + "bc" vs "ab" + "c" in the tenant and a grant.
    const q1 = principalFromClaims({ sub: 's', org: 'a', scope: 'tools:bc' }, auth);
    const q2 = principalFromClaims({ sub: 's', org: 'ab', scope: 'tools:c' }, auth);
    expect(q1.shareKey).not.toBe(q2.shareKey);
  });
});

describe('grantsMatcher', () => {
  const principal = (grants: Principal['grants'], cap?: string[]) =>
    made({ grants, ...(cap ? { cap } : {}) });

  it('no grants: nothing (fail closed)', () => {
    const granted = grantsMatcher(principal([]));
    for (const name of ['a', 'github__get', '', '*']) expect(granted(name)).toBe(false);
  });

  it("'*' grants everything: the literal '*' (auth off) and the glob '*'", () => {
    expect(grantsMatcher(anonymousPrincipal)('anything__at_all')).toBe(true);
    expect(grantsMatcher(principal(['*']))('anything__at_all')).toBe(true);
  });

  it('globs over exposed names, case-sensitive, full-string', () => {
    const granted = grantsMatcher(principal(['github__*', 'fs__read_?']));
    expect(granted('github__get_issue')).toBe(true);
    expect(granted('fs__read_a')).toBe(true);
    expect(granted('fs__read_ab')).toBe(false);
    expect(granted('GitHub__get_issue')).toBe(false);
    expect(granted('x_github__get')).toBe(false);
  });

  it('grants AND cap: the cap narrows, never widens', () => {
    const granted = grantsMatcher(principal(['github__*', 'fs__*'], ['github__get_*', 'slack__*']));
    expect(granted('github__get_issue')).toBe(true);
    expect(granted('github__delete_repo')).toBe(false); // granted, outside the cap
    expect(granted('slack__post')).toBe(false); // in the cap, not granted
    expect(granted('fs__read')).toBe(false);
    expect(grantsMatcher(principal('*', ['a__*']))('b__x')).toBe(false);
    expect(grantsMatcher(principal('*', ['a__*']))('a__x')).toBe(true);
    expect(grantsMatcher(principal(['*'], []))('a__x')).toBe(false); // an empty cap admits nothing
  });

  it('works end to end from claims', () => {
    const auth = authConfig({ tenantClaim: 'org', tenants: { acme: { grants: ['github__get_*'] } } });
    const granted = grantsMatcher(
      principalFromClaims({ sub: 'u', org: 'acme', scope: 'tools:github__*' }, auth),
    );
    expect(granted('github__get_issue')).toBe(true);
    expect(granted('github__create_issue')).toBe(false);
  });
});
