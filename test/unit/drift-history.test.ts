import { describe, expect, it } from 'vitest';
import { type DriftRecord, withoutRepeats } from '../../src/store/drift-history.js';

const held = (tool: string, fingerprint: string, at: number): DriftRecord => ({
  server: 'github',
  tool,
  kind: 'quarantined',
  fingerprint,
  at,
});

describe('drift history as shown (#52)', () => {
  it('a repeat of the same tool’s next older event (two instances writing at once) is shown once, when it was first written', () => {
    const rows = [held('search', 'f2', 1_300), held('search', 'f2', 1_299), held('search', 'f1', 1_000)];
    expect(withoutRepeats(rows).map((e) => e.at)).toEqual([1_299, 1_000]);
  });

  it('a hold of what was just accepted (an instance that has not learnt of the accept yet) is not shown', () => {
    const accepted: DriftRecord = { ...held('search', 'f2', 1_200), kind: 'accepted', by: 'ops' };
    const rows = [held('search', 'f2', 1_250), accepted, held('search', 'f2', 1_000)];
    expect(withoutRepeats(rows).map((e) => [e.kind, e.at])).toEqual([
      ['accepted', 1_200],
      ['quarantined', 1_000],
    ]);
  });

  it('keeps what is new: a later hold of another definition, an accept of a held one, each tool on its own', () => {
    const accepted: DriftRecord = { ...held('search', 'f1', 1_200), kind: 'accepted', by: 'ops' };
    const rows = [
      held('search', 'f3', 1_300),
      held('issues', 'f1', 1_250),
      accepted,
      held('search', 'f1', 1_000),
    ];
    expect(withoutRepeats(rows).map((e) => [e.tool, e.kind, e.at])).toEqual([
      ['search', 'quarantined', 1_300],
      ['issues', 'quarantined', 1_250],
      ['search', 'accepted', 1_200],
      ['search', 'quarantined', 1_000],
    ]);
  });
});
