import { describe, expect, it } from 'vitest';
import { bearerChallenge, parseChallenges } from '../../src/upstream/oauth/challenge.js';

// RFC 9110 §11.6.1 WWW-Authenticate; RFC 6750 §3 Bearer parameters; RFC 9728 §5.1 resource_metadata.

describe('parseChallenges', () => {
  it('reads a Bearer challenge with MCP parameters (2026-07-28 basic/authorization, Scope Selection)', () => {
    const c = bearerChallenge(
      'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write"',
    );
    expect(c).toEqual({
      scheme: 'bearer',
      params: {
        resource_metadata: 'https://mcp.example.com/.well-known/oauth-protected-resource',
        scope: 'files:read files:write',
      },
      resourceMetadata: 'https://mcp.example.com/.well-known/oauth-protected-resource',
      scope: ['files:read', 'files:write'],
    });
  });

  it('reads an insufficient_scope challenge across folded whitespace', () => {
    const c = bearerChallenge(
      'Bearer error="insufficient_scope",\n scope="files:write",\t error_description="needs write"',
    );
    expect(c?.error).toBe('insufficient_scope');
    expect(c?.scope).toEqual(['files:write']);
    expect(c?.params.error_description).toBe('needs write');
  });

  it('splits several challenges, with commas and escaped quotes inside quoted strings', () => {
    const cs = parseChallenges(
      'Basic realm="a, b", Bearer realm="say \\"hi\\", ok", scope=read, Newauth realm=apps, type=1, title="Login to \\"apps\\""',
    );
    expect(cs.map((c) => c.scheme)).toEqual(['basic', 'bearer', 'newauth']);
    expect(cs[0]?.params).toEqual({ realm: 'a, b' });
    expect(cs[1]?.params).toEqual({ realm: 'say "hi", ok', scope: 'read' });
    expect(cs[1]?.scope).toEqual(['read']);
    expect(cs[2]?.params).toEqual({ realm: 'apps', type: '1', title: 'Login to "apps"' });
  });

  it('reads token68 credentials and bare schemes as challenges without parameters', () => {
    const cs = parseChallenges('Negotiate a87421000492aa874209af8bc028==, Bearer, DPoP algs="ES256"');
    expect(cs.map((c) => c.scheme)).toEqual(['negotiate', 'bearer', 'dpop']);
    expect(cs[0]?.params).toEqual({});
    expect(cs[1]?.params).toEqual({});
    expect(cs[2]?.params).toEqual({ algs: 'ES256' });
  });

  it('is case-insensitive in scheme and parameter names; the first of a repeated parameter wins', () => {
    const c = bearerChallenge('BEARER Scope="a", SCOPE="b", Resource_Metadata=https://x/y');
    expect(c?.scope).toEqual(['a']);
    expect(c?.resourceMetadata).toBe('https://x/y');
  });

  it('treats an empty scope as no scope', () => {
    expect(bearerChallenge('Bearer scope=""')?.scope).toBeUndefined();
    expect(bearerChallenge('Bearer scope="  "')?.scope).toBeUndefined();
  });

  it('never throws on junk and keeps what it can read', () => {
    const junk = [
      '',
      ',,,',
      '=',
      '"',
      'Bearer "',
      'Bearer scope="unterminated',
      'Bearer scope=',
      'Bearer ===, Basic',
      '@@@ Bearer scope=a',
      'Bearer a=b=c, realm="x"',
      '\u0000\u00ff Bearer',
      'Bearer realm="x" junk junk, error="e"',
      'x'.repeat(10_000),
    ];
    for (const h of junk) expect(() => parseChallenges(h)).not.toThrow();
    expect(parseChallenges(null)).toEqual([]);
    expect(parseChallenges('')).toEqual([]);
    expect(bearerChallenge('Bearer scope="unterminated')?.scope).toEqual(['unterminated']);
    expect(bearerChallenge('Bearer realm="x" junk junk, error="e"')?.error).toBe('e');
    expect(bearerChallenge('@@@ Bearer scope=a')?.scope).toEqual(['a']);
  });

  it('finds no Bearer challenge where there is none', () => {
    expect(bearerChallenge('Basic realm="x"')).toBeUndefined();
    expect(bearerChallenge(null)).toBeUndefined();
  });
});
