import { describe, expect, it } from 'vitest';
import { CallerBounds, type CallerLimits, type Holder } from '../../src/server/mcp/caller-bounds.js';
import { HeldCalls } from '../../src/server/mcp/rounds/mrtr.js';
import { TaskPumps } from '../../src/server/mcp/task-pumps.js';
import { eventually } from '../helpers/harness.js';

const who = (tenant: string, subject: string): Holder => ({ key: `${tenant}/${subject}`, tenant });
const alice = who('acme', 'alice');
const carol = who('acme', 'carol');
const bob = who('globex', 'bob');
const dan = who('initech', 'dan');

/** A table of named entries under `limits`; `ended` lists what it had to end, in order. */
function table(limits: CallerLimits) {
  const bounds = new CallerBounds<string>(limits);
  const ended: string[] = [];
  const add = (entry: string, holder: Holder) => {
    bounds.admit(holder, (e) => ended.push(e));
    bounds.add(entry, holder);
  };
  return { bounds, ended, add };
}

describe('CallerBounds (SECURITY G4)', () => {
  it('49.6: past its principal bound a caller ends its own oldest, never another caller', () => {
    const t = table({ total: 100, perPrincipal: 2, perTenant: 100 });
    t.add('b1', bob);
    for (const e of ['a1', 'a2', 'a3', 'a4']) t.add(e, alice);
    expect(t.ended).toEqual(['a1', 'a2']);
    expect(t.bounds.size).toBe(3);
  });

  it('49.6: past its tenant bound a caller ends its tenant own oldest, never another tenant', () => {
    const t = table({ total: 100, perPrincipal: 100, perTenant: 3 });
    t.add('b1', bob);
    t.add('a1', alice);
    t.add('c1', carol);
    t.add('a2', alice);
    t.add('c2', carol);
    t.add('a3', alice);
    expect(t.ended).toEqual(['a1', 'c1']);
  });

  it('49.6: a full instance takes room from the tenant that holds the most, a newcomer keeps its few', () => {
    const t = table({ total: 5, perPrincipal: 100, perTenant: 3 });
    t.add('b1', bob);
    t.add('a1', alice);
    t.add('c1', carol);
    t.add('a2', alice);
    t.add('b2', bob);
    // Full (5): dan has none; acme holds the most, and alice the most of acme.
    t.add('d1', dan);
    expect(t.ended).toEqual(['a1']);
    // A tie between acme and globex (2 each): the newcomer's tenant gives up its own first.
    t.add('b3', bob);
    expect(t.ended).toEqual(['a1', 'b1']);
    t.bounds.remove('d1');
    t.bounds.remove('d1');
    expect(t.bounds.size).toBe(4);
  });

  it('49.6: an entry that ended on its own frees its place, and is counted once', () => {
    const t = table({ total: 100, perPrincipal: 2, perTenant: 100 });
    t.add('a1', alice);
    t.bounds.add('a1', alice);
    t.add('a2', alice);
    t.bounds.remove('a1');
    t.add('a3', alice);
    expect(t.ended).toEqual([]);
  });

  it('49.6: held calls: one tenant flooding abandons only its own questions', () => {
    const abandoned: string[] = [];
    const held = new HeldCalls({ total: 3, perPrincipal: 3, perTenant: 2 });
    const call = (token: string) => ({
      token,
      round: 1,
      expiresAt: 60_000,
      abandon: () => abandoned.push(token),
    });
    held.hold(call('b1'), bob, 0);
    for (const t of ['a1', 'a2', 'a3', 'a4']) held.hold(call(t), t === 'a3' ? carol : alice, 0);
    expect(abandoned).toEqual(['a1', 'a2']);
    expect(held.get('b1')).toBeDefined();
    // A call held again for its next round keeps its place and ends nobody.
    held.hold(call('a3'), carol, 0);
    expect(abandoned).toEqual(['a1', 'a2']);
    held.closeAll();
  });

  it('49.6: task pumps: one tenant flooding ends only its own', async () => {
    const pumps = new TaskPumps(() => 0, { total: 3, perPrincipal: 3, perTenant: 2 });
    const refused: string[] = [];
    // Each pump's server call asks one question at once and waits for its answer.
    const start = (taskId: string, holder: Holder) =>
      pumps.pending(taskId, holder, (onInput) =>
        onInput({ q: { method: 'elicitation/create' } }).then(
          () => ({}),
          (e: Error) => {
            refused.push(`${taskId}: ${e.message}`);
            return {};
          },
        ),
      );
    expect(await start('b1', bob)).toEqual({ i1: { method: 'elicitation/create' } });
    for (const id of ['a1', 'a2', 'a3']) await start(id, alice);
    // The refusal reaches the server's call a few promise steps later.
    await eventually(() => refused.length > 0, 'the refusal');
    expect(refused).toEqual(['a1: too many tasks waiting for input']);
    expect(await start('b1', bob)).toEqual({ i1: { method: 'elicitation/create' } });
    pumps.closeAll();
  });
});
