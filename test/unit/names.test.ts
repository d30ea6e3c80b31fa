import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assignNames, candidateName, EXPOSED_NAME, type NameRequest } from '../../src/aggregate/names.js';

/** Legal prefixes as config validation guarantees them: 1-32 of [A-Za-z0-9_-], no `__`. */
const legalPrefix = fc.stringMatching(/^[A-Za-z0-9_-]{1,32}$/).filter((p) => !p.includes('__'));
const prefixArb = fc.oneof(legalPrefix, fc.constant(false as const));

/** Anything an upstream might send: any code points, lone surrogates, empty, very long. */
const anyTool = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.string({ unit: 'grapheme', maxLength: 80 }),
  fc.string({ unit: fc.constantFrom('\uD800', '\uDC00', 'a', '.'), maxLength: 10 }),
  fc.string({ unit: fc.constantFrom('a', 'b', '_', '-'), minLength: 60, maxLength: 200 }),
  fc.constant(''),
);

/** Small alphabets so generated names sanitize onto each other often. */
const clashyTool = fc.oneof(
  fc.string({ unit: fc.constantFrom('a', 'b', '_', '.', ' ', '-', 'é', '😀'), maxLength: 6 }),
  // Long names sharing a 64-char (and 55-char) prefix, differing only past the clamp.
  fc
    .tuple(
      fc.constantFrom('x'.repeat(64), 'y'.repeat(55), 'srv__'.padEnd(70, 'z')),
      fc.string({ maxLength: 3 }),
    )
    .map(([head, tail]) => head + tail),
);

/** Servers with a fixed prefix each, plus requests drawn from them; adversarial tool names. */
const requestsArb = fc
  .tuple(
    fc.array(fc.tuple(fc.constantFrom('s1', 's2', 's3', 's4'), prefixArb), { minLength: 1, maxLength: 4 }),
    fc.array(fc.tuple(fc.nat(), clashyTool), { maxLength: 30 }),
    fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 5 }),
  )
  .map(([servers, picks, mimics]) => {
    const byServer = new Map(servers);
    const list = [...byServer.entries()];
    const reqs: NameRequest[] = picks.map(([n, tool]) => {
      const [server, prefix] = list[n % list.length]!;
      return { server, prefix, tool };
    });
    // A legal tool whose verbatim name equals another request's rewritten name.
    for (const [a, b] of mimics) {
      const victim = reqs[a % Math.max(reqs.length, 1)];
      if (!victim) break;
      const rewritten = candidateName(victim.prefix, victim.tool);
      if (rewritten.verbatim) continue;
      const [server, prefix] = list[b % list.length]!;
      const tool = prefix === false ? rewritten.name : rewritten.name.slice(prefix.length + 2);
      if (prefix === false || rewritten.name.startsWith(`${prefix}__`)) {
        reqs.splice(b % (reqs.length + 1), 0, { server, prefix, tool });
      }
    }
    return reqs;
  });

describe('candidateName', () => {
  it('joins prefix and tool with a double underscore', () => {
    expect(candidateName('everything', 'echo')).toEqual({ name: 'everything__echo', verbatim: true });
  });

  it('mounts unprefixed tools as-is', () => {
    expect(candidateName(false, 'echo')).toEqual({ name: 'echo', verbatim: true });
  });

  it('rewrites illegal characters with a hash suffix', () => {
    const { name, verbatim } = candidateName('srv', 'my.tool');
    expect(verbatim).toBe(false);
    expect(name).toMatch(/^srv__my_tool_[0-9a-z]{8}$/);
  });

  it('clamps long names to 64 characters, keeping the prefix', () => {
    const { name } = candidateName('srv', 'x'.repeat(100));
    expect(name).toHaveLength(64);
    expect(name.startsWith('srv__xxx')).toBe(true);
    expect(name).toMatch(EXPOSED_NAME);
  });

  it('gives an empty unprefixed tool a hash-only name', () => {
    expect(candidateName(false, '').name).toMatch(/^[0-9a-z]{8}$/);
  });

  it('hashes prefixed and unprefixed inputs differently', () => {
    const prefixed = candidateName('a', 'b.c').name;
    const unprefixed = candidateName(false, 'a__b.c').name;
    expect(prefixed.slice(0, -8)).toBe(unprefixed.slice(0, -8));
    expect(prefixed).not.toBe(unprefixed);
  });

  it('does not confuse prefix and tool boundaries', () => {
    expect(candidateName('a_', '_b.').name).not.toBe(candidateName('a', '__b.').name);
  });

  it('keeps lone surrogates distinct', () => {
    expect(candidateName(false, '\uD800').name).not.toBe(candidateName(false, '\uDC00').name);
  });

  it('always produces a legal name', () => {
    fc.assert(
      fc.property(prefixArb, anyTool, (prefix, tool) => {
        expect(candidateName(prefix, tool).name).toMatch(EXPOSED_NAME);
      }),
      { numRuns: 2000 },
    );
  });

  it('leaves legal names unchanged', () => {
    fc.assert(
      fc.property(legalPrefix, fc.stringMatching(/^[A-Za-z0-9_-]{1,20}$/), (prefix, tool) => {
        expect(candidateName(prefix, tool)).toEqual({ name: `${prefix}__${tool}`, verbatim: true });
        expect(candidateName(false, tool)).toEqual({ name: tool, verbatim: true });
      }),
    );
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(prefixArb, anyTool, (prefix, tool) => {
        expect(candidateName(prefix, tool)).toEqual(candidateName(prefix, tool));
      }),
    );
  });
});

describe('assignNames', () => {
  it('assigns plain names in order', () => {
    const { names, collisions } = assignNames([
      { server: 'everything', prefix: 'everything', tool: 'echo' },
      { server: 'memory', prefix: false, tool: 'read_graph' },
    ]);
    expect(names).toEqual(['everything__echo', 'read_graph']);
    expect(collisions).toEqual([]);
  });

  it('reports an unprefixed collision across two servers, naming both', () => {
    const { names, collisions } = assignNames([
      { server: 'alpha', prefix: false, tool: 'search' },
      { server: 'beta', prefix: false, tool: 'search' },
    ]);
    expect(names).toEqual(['search', null]);
    expect(collisions).toEqual([
      {
        name: 'search',
        kept: { server: 'alpha', tool: 'search' },
        dropped: { server: 'beta', tool: 'search' },
      },
    ]);
  });

  it('reports an unprefixed collision for rewritten names too', () => {
    const { names, collisions } = assignNames([
      { server: 'alpha', prefix: false, tool: 'web.search' },
      { server: 'beta', prefix: false, tool: 'web.search' },
    ]);
    expect(names[0]).toMatch(/^web_search_[0-9a-z]{8}$/);
    expect(names[1]).toBeNull();
    expect(collisions).toEqual([
      {
        name: names[0],
        kept: { server: 'alpha', tool: 'web.search' },
        dropped: { server: 'beta', tool: 'web.search' },
      },
    ]);
  });

  it('gives names that sanitize alike distinct names', () => {
    const { names } = assignNames([
      { server: 's', prefix: 's', tool: 'a.b' },
      { server: 's', prefix: 's', tool: 'a b' },
      { server: 's', prefix: 's', tool: 'a_b' },
    ]);
    expect(names[2]).toBe('s__a_b');
    expect(new Set(names).size).toBe(3);
    for (const n of names) expect(n).toMatch(EXPOSED_NAME);
  });

  it('never lets a rewritten name displace a legal one, even when listed first', () => {
    const rewritten = candidateName(false, 'a.b').name;
    const { names, collisions } = assignNames([
      { server: 'x', prefix: false, tool: 'a.b' },
      { server: 'y', prefix: false, tool: rewritten },
    ]);
    expect(names[1]).toBe(rewritten);
    expect(names[0]).not.toBe(rewritten);
    expect(names[0]).toMatch(/^a_b_[0-9a-z]{8}$/);
    expect(collisions).toEqual([]);
  });

  it('separates long names that share a 64-character prefix', () => {
    const head = 'x'.repeat(64);
    const { names } = assignNames([
      { server: 's', prefix: false, tool: `${head}1` },
      { server: 's', prefix: false, tool: `${head}2` },
      { server: 's', prefix: false, tool: head },
    ]);
    expect(names[2]).toBe(head);
    expect(new Set(names).size).toBe(3);
    for (const n of names) expect(n).toMatch(EXPOSED_NAME);
  });

  it('gives distinct inputs distinct legal names (property)', () => {
    fc.assert(
      fc.property(requestsArb, (reqs) => {
        const { names, collisions } = assignNames(reqs);
        expect(names).toHaveLength(reqs.length);
        const owner = new Map<string, string>();
        reqs.forEach((req, i) => {
          const name = names[i];
          if (name === null || name === undefined) return;
          expect(name).toMatch(EXPOSED_NAME);
          const id = JSON.stringify([req.server, req.tool]);
          const prev = owner.get(name);
          // Identical (server, tool) pairs are the same input; only distinct ones must differ.
          if (prev !== undefined) expect(prev).toBe(id);
          owner.set(name, id);
        });
        // Every null is explained by exactly one collision record.
        expect(collisions).toHaveLength(names.filter((n) => n === null).length);
        for (const c of collisions) expect(names).toContain(c.name);
      }),
      { numRuns: 1000 },
    );
  });

  it('drops only requests whose candidate an earlier request already holds', () => {
    fc.assert(
      fc.property(requestsArb, (reqs) => {
        const { names } = assignNames(reqs);
        reqs.forEach((req, i) => {
          if (names[i] !== null) return;
          // Verbatim names clash on the name itself (`a__x` can come from prefix `a` or from an
          // unprefixed `a__x`); rewritten ones only on the same original prefix and tool.
          const mine = candidateName(req.prefix, req.tool);
          const earlier = reqs
            .slice(0, i)
            .some((r) =>
              mine.verbatim
                ? candidateName(r.prefix, r.tool).name === mine.name
                : r.prefix === req.prefix && r.tool === req.tool,
            );
          expect(earlier).toBe(true);
        });
      }),
    );
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(requestsArb, (reqs) => {
        expect(assignNames(reqs)).toEqual(assignNames(reqs.map((r) => ({ ...r }))));
      }),
    );
  });
});
