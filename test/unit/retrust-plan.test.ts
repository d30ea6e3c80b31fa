import { describe, expect, it } from 'vitest';
import { baselineFrom } from '../../src/guards/drift.js';
import { identityLine, planRetrust } from '../../src/guards/retrust-plan.js';

const tool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object' as const, properties: {} },
});

/** The plan `manifold retrust` and the admin endpoint share (C3): lines shown, baseline written. */
describe('planRetrust', () => {
  it('C3: lists a changed, a new and a removed tool, and the next baseline is the listing', async () => {
    const old = await baselineFrom([tool('a', 'A v1'), tool('gone', 'G')]);
    const now = [tool('a', 'A v2'), tool('b', 'B')];
    const plan = await planRetrust(old, now);
    if ('refused' in plan) throw new Error(plan.refused);
    expect(plan.changes).toBe(3);
    expect(plan.lines.join('\n')).toContain('+ A v2');
    expect(plan.lines).toContain('+ new tool b');
    expect(plan.lines).toContain('- removed tool gone');
    expect(plan.next).toEqual(await baselineFrom(now));
  });

  it('C3: one tool changes only its own entry; an unknown one is refused', async () => {
    const old = await baselineFrom([tool('a', 'A v1'), tool('c', 'C')]);
    const now = [tool('a', 'A v2'), tool('b', 'B'), tool('c', 'C')];
    const plan = await planRetrust(old, now, 'a');
    if ('refused' in plan) throw new Error(plan.refused);
    expect(plan.changes).toBe(1);
    expect(Object.keys(plan.next).sort()).toEqual(['a', 'c']);
    expect(plan.next.a).toEqual((await baselineFrom(now)).a);
    expect(await planRetrust(old, now, 'zzz')).toEqual({
      refused: expect.stringMatching(/^neither lists nor trusted/),
    });
    const same = await planRetrust(old, [tool('a', 'A v1'), tool('c', 'C')]);
    expect('refused' in same ? -1 : same.changes).toBe(0);
  });

  it('names both identities of a server whose command or URL changed', () => {
    expect(
      identityLine(
        'gh',
        { transport: 'stdio', target: '["a"]' },
        { transport: 'sse', target: 'https://x/sse' },
      ),
    ).toBe('identity of gh changed:\n- stdio ["a"]\n+ sse https://x/sse');
  });
});
