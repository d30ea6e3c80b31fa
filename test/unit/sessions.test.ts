import { describe, expect, it } from 'vitest';
import { SessionTable } from '../../src/server/mcp/sessions.js';
import { principal as made } from '../helpers/factories.js';

const principal = (tenant: string, subject: string) => made({ tenant, subject });

describe('#13.7 sessions are bounded per principal and per tenant', () => {
  it("a flood of sessions by one principal evicts only that principal's own, oldest first", () => {
    const table = new SessionTable({ max: 1000, idleSeconds: 3600, perPrincipal: 10, perTenant: 50 });
    const alice = principal('acme', 'alice');
    const bob = principal('globex', 'bob');
    const bobs = Array.from({ length: 5 }, () => table.create(bob, '2025-11-25', 0));
    const floods = Array.from({ length: 10_001 }, () => table.create(alice, '2025-11-25', 0));
    for (const s of bobs) expect(table.get(s.id, bob.key)).toBe(s);
    expect(table.size).toBe(15);
    // Alice keeps her newest ten; the first ones are gone.
    expect(table.get(floods[0]!.id, alice.key)).toBeUndefined();
    expect(table.get(floods.at(-1)!.id, alice.key)).toBe(floods.at(-1));
  });

  it("many subjects of one tenant evict only that tenant's sessions", () => {
    const table = new SessionTable({ max: 1000, idleSeconds: 3600, perPrincipal: 10, perTenant: 50 });
    const other = principal('globex', 'bob');
    const kept = table.create(other, '2025-11-25', 0);
    for (let i = 0; i < 5000; i++) table.create(principal('acme', `s${i}`), '2025-11-25', 0);
    expect(table.get(kept.id, other.key)).toBe(kept);
    expect(table.size).toBe(51);
  });

  it('an ended session leaves the indexes: a principal that deletes its sessions may open new ones', () => {
    const table = new SessionTable({ max: 1000, idleSeconds: 3600, perPrincipal: 2, perTenant: 50 });
    const a = principal('acme', 'a');
    const first = table.create(a, '2025-11-25', 0);
    const second = table.create(a, '2025-11-25', 0);
    table.delete(first.id);
    const third = table.create(a, '2025-11-25', 0);
    expect(table.get(second.id, a.key)).toBe(second);
    expect(table.get(third.id, a.key)).toBe(third);
  });
});

describe('#15 the table tells a shared store which sessions end for good', () => {
  it('a DELETE and an eviction by a bound are forgotten; an idle expiry, a drop and a shutdown are not', async () => {
    const table = new SessionTable({ max: 3, idleSeconds: 3600, perPrincipal: 2, perTenant: 50 });
    const forgotten: string[] = [];
    table.onForget = (id) => forgotten.push(id);
    const a = principal('acme', 'a');
    const first = table.create(a, '2025-11-25', 0);
    const second = table.create(a, '2025-11-25', 0);
    // The per-principal bound evicts the first: its shared record must not outlive it.
    table.create(a, '2025-11-25', 0);
    expect(forgotten).toEqual([first.id]);
    table.delete(second.id);
    expect(forgotten).toEqual([first.id, second.id]);
    // The table-wide bound (max 3) too.
    const b = table.create(principal('acme', 'b'), '2025-11-25', 0);
    table.create(principal('acme', 'c'), '2025-11-25', 0);
    const d = table.create(principal('acme', 'd'), '2025-11-25', 0);
    expect(forgotten).toHaveLength(3);
    // Deleted elsewhere: the local copy ends, and nothing is forgotten twice.
    table.drop(d.id);
    expect(table.get(d.id, principal('acme', 'd').key)).toBeUndefined();
    table.clear();
    expect(forgotten).toHaveLength(3);
    expect(forgotten).not.toContain(b.id);

    const idle = new SessionTable({ max: 10, idleSeconds: 0.05 });
    const expired: string[] = [];
    idle.onForget = (id) => expired.push(id);
    const s = idle.create(a, '2025-11-25', 0);
    // Time itself must pass: the idle limit is read from the clock, and asking earlier would
    // count as use.
    await new Promise((r) => setTimeout(r, 120));
    expect(idle.get(s.id, a.key)).toBeUndefined();
    expect(expired).toEqual([]);
  });

  it('an adopted session keeps its id, owner, version, capabilities and log level, under the same bounds', () => {
    const table = new SessionTable({ max: 10, idleSeconds: 3600, perPrincipal: 1 });
    const a = principal('acme', 'a');
    const record = {
      id: '6f1c1f7e-8a43-4a4b-9d43-0b7f3c3a1d01',
      owner: a.key,
      protocolVersion: '2025-06-18',
      clientCapabilities: { sampling: {} },
      logLevel: 'error',
      createdAt: 5,
    };
    const adopted = table.adopt(record, a);
    expect(table.get(record.id, a.key)).toBe(adopted);
    expect(table.get(record.id, principal('acme', 'z').key)).toBeUndefined();
    expect(adopted).toMatchObject({ protocolVersion: '2025-06-18', logLevel: 'error', createdAt: 5 });
    expect(adopted.clientCapabilities).toEqual({ sampling: {} });
    table.create(a, '2025-11-25', 0);
    expect(table.get(record.id, a.key)).toBeUndefined();
  });
});

describe('isolation identity segments', () => {
  it('keep a tenant name inside one path segment, and two names apart', async () => {
    const { identitySegment } = await import('../../src/upstream/isolation.js');
    for (const hostile of ['../../etc/passwd', '..', '.', '', 'a/b', 'a\\b', 'C:\\x', 'ä', '\u0000']) {
      const s = identitySegment(hostile);
      expect(s).not.toMatch(/[/\\]/);
      expect(s).not.toBe('..');
      expect(s.length).toBeGreaterThan(0);
    }
    expect(identitySegment('acme')).toBe('acme');
    const names = ['a.b', 'a_b', 'a-b', 'a/b', 'a.002fb', 'a\u002fb'];
    expect(new Set(names.map(identitySegment)).size).toBe(new Set(names).size);
  });
});

describe('#13.8 SSE streams are bounded for a client that stops reading', () => {
  it('past the soft bound progress is dropped; past the hard bound the stream ends; a reader that keeps up loses nothing', async () => {
    const { SseStream } = await import('../../src/server/mcp/sse.js');
    const stalled = new SseStream({ softLimit: 64 * 1024, hardLimit: 256 * 1024 });
    let closed = 0;
    stalled.onclose = () => closed++;
    const note = JSON.stringify({
      jsonrpc: '2.0',
      method: 'notifications/progress',
      params: { p: 'x'.repeat(1000) },
    });
    let sent = 0;
    for (let i = 0; i < 100_000; i++) if (stalled.send(note, true)) sent++;
    // About 64 KiB of it queued; the rest dropped, nothing more held.
    expect(sent).toBeLessThan(80);
    expect(stalled.dropped).toBe(100_000 - sent);
    expect(stalled.closed).toBe(false);
    // What must go (a result, a request) still goes, until the hard bound ends the stream.
    let must = 0;
    while (stalled.send(note) && must < 10_000) must++;
    expect(must).toBeLessThan(250);
    expect(stalled.closed).toBe(true);
    expect(closed).toBe(1);
    // The reader learns why when it reads again.
    await expect(stalled.readable.getReader().read()).rejects.toThrow(/fell too far behind/);

    const reading = new SseStream({ softLimit: 64 * 1024, hardLimit: 256 * 1024 });
    const reader = reading.readable.getReader();
    let got = 0;
    for (let i = 0; i < 2000; i++) {
      expect(reading.send(note, true)).toBe(true);
      got += (await reader.read()).value?.byteLength ?? 0;
    }
    expect(reading.dropped).toBe(0);
    expect(got).toBeGreaterThan(2000 * 1000);
  });
});
