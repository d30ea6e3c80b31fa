import { describe, expect, it } from 'vitest';
import {
  DEFAULT_SNAPSHOT_TTL_MS,
  MIN_SNAPSHOT_TTL_MS,
  snapshotTtlFor,
} from '../../deploy/workers/snapshot.js';

/**
 * How long a Worker isolate serves an upstream object's snapshot (#15): the deployment's bound is
 * how soon a quarantine or a re-trust reaches every isolate, so a server's hint may shorten it and
 * never lengthen it.
 */
describe('snapshot ttl', () => {
  it('no hint: the bound', () => {
    expect(snapshotTtlFor(undefined, DEFAULT_SNAPSHOT_TTL_MS)).toBe(DEFAULT_SNAPSHOT_TTL_MS);
  });
  it('a shorter hint shortens it', () => {
    expect(snapshotTtlFor(2_000, 5_000)).toBe(2_000);
  });
  it('a longer hint (an hour) does not lengthen it', () => {
    expect(snapshotTtlFor(3_600_000, 5_000)).toBe(5_000);
  });
  it('never under the minimum, whatever the hint', () => {
    expect(snapshotTtlFor(0, 5_000)).toBe(MIN_SNAPSHOT_TTL_MS);
    expect(snapshotTtlFor(10, 5_000)).toBe(MIN_SNAPSHOT_TTL_MS);
  });
});
