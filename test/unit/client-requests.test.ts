import { describe, expect, it } from 'vitest';
import { Sealer } from '../../src/auth/seal.js';
import {
  boundClientRequest,
  explainMissing,
  mayAsk,
  offeredCapabilities,
  relayedCapabilities,
} from '../../src/guards/client-features.js';
import { HeldCalls, openState, type StateBody } from '../../src/server/mcp/rounds/mrtr.js';
import { eventually } from '../helpers/harness.js';

const secret = new TextEncoder().encode('a-test-secret-of-some-length-000');
const OFF = { sampling: false, elicitation: true, roots: false };
const ON = { sampling: true, elicitation: true, roots: true };

describe('Sealer', () => {
  it('opens what it sealed, and nothing altered, foreign or malformed', async () => {
    const s = await Sealer.create(secret, 'mrtr');
    const sealed = await s.seal({ a: 1, b: 'x' });
    expect(await s.open(sealed)).toEqual({ a: 1, b: 'x' });
    const [body, mac] = sealed.split('.');
    const other = await s.seal({ a: 2, b: 'x' });
    // Another body under this MAC, or this body under another MAC.
    expect(await s.open(`${other.split('.')[0]}.${mac}`)).toBeUndefined();
    expect(await s.open(`${body}.${other.split('.')[1]}`)).toBeUndefined();
    for (const bad of [undefined, 42, '', 'no-dot', 'a.b.c', '!!.??', 'x'.repeat(70_000)]) {
      expect(await s.open(bad)).toBeUndefined();
    }
  });

  it('a value sealed under one label or secret never opens under another', async () => {
    const a = await Sealer.create(secret, 'mrtr');
    const b = await Sealer.create(secret, 'cursor');
    const c = await Sealer.create(new TextEncoder().encode('another-secret'), 'mrtr');
    const sealed = await a.seal({ v: 1 });
    expect(await b.open(sealed)).toBeUndefined();
    expect(await c.open(sealed)).toBeUndefined();
  });
});

describe('openState', () => {
  const base: StateBody = {
    v: 1,
    k: 'wrap',
    p: 'tenant-a|alice',
    m: 'tools/call',
    n: 'ref__t',
    x: 2_000,
    s: 'ref',
  };
  const expect0 = { principal: 'tenant-a|alice', method: 'tools/call', target: 'ref__t', now: 1_000 };

  it('opens a state for the same principal, method and target before it expires', async () => {
    const s = await Sealer.create(secret, 'mrtr');
    expect(await openState(s, await s.seal(base), expect0)).toEqual(base);
  });

  it.each([
    ['another principal', { principal: 'tenant-b|alice' }],
    ['another method', { method: 'prompts/get' }],
    ['another tool', { target: 'ref__other' }],
    ['after its expiry', { now: 2_001 }],
  ])('refuses it for %s with -32602 and a way forward', async (_what, change) => {
    const s = await Sealer.create(secret, 'mrtr');
    const sealed = await s.seal(base);
    const e = await openState(s, sealed, { ...expect0, ...change }).catch((x: unknown) => x);
    expect(e).toMatchObject({ code: 'ERR_INVALID_PARAMS' });
    expect((e as Error).message).toMatch(/send the original request again/);
  });

  it('refuses a sealed value that is not a state', async () => {
    const s = await Sealer.create(secret, 'mrtr');
    for (const v of [{ ...base, v: 2 }, { ...base, k: 'other' }, { ...base, x: 'soon' }, null, 'text']) {
      await expect(openState(s, await s.seal(v), expect0)).rejects.toMatchObject({
        code: 'ERR_INVALID_PARAMS',
      });
    }
  });
});

describe('HeldCalls', () => {
  const call = (token: string, ended: string[]) => ({
    token,
    round: 1,
    expiresAt: 0,
    abandon: (reason: Error) => ended.push(`${token}: ${reason.message}`),
  });

  const LIMITS = { total: 10_000, perPrincipal: 100, perTenant: 1000 };
  const alice = { key: 'acme/alice', tenant: 'acme' };

  it('is bounded: past its size the oldest held call is abandoned', () => {
    const ended: string[] = [];
    const held = new HeldCalls({ total: 2, perPrincipal: 2, perTenant: 2 });
    for (const t of ['a', 'b', 'c']) held.hold({ ...call(t, ended), expiresAt: 60_000 }, alice, 0);
    expect(held.size).toBe(2);
    expect(held.get('a')).toBeUndefined();
    expect(ended).toEqual(['a: too many calls waiting for input']);
    held.closeAll();
    expect(ended).toHaveLength(3);
    expect(held.size).toBe(0);
  });

  it('abandons a call whose client never comes back', async () => {
    const ended: string[] = [];
    const held = new HeldCalls(LIMITS);
    held.hold({ ...call('a', ended), expiresAt: 5 }, alice, 0);
    await eventually(() => ended.length > 0, 'the call abandoned');
    expect(ended).toEqual(['a: the client did not answer in time']);
    expect(held.get('a')).toBeUndefined();
  });

  it('forgets a released call without abandoning it', () => {
    const ended: string[] = [];
    const held = new HeldCalls(LIMITS);
    held.hold({ ...call('a', ended), expiresAt: 60_000 }, alice, 0);
    held.release('a');
    held.closeAll();
    expect(ended).toEqual([]);
    expect(held.get(42)).toBeUndefined();
  });
});

describe('client features', () => {
  it('mayAsk: only known requests, enabled for the server, declared by the client', () => {
    expect(mayAsk('s', ON, { sampling: {} }, 'sampling/createMessage')).toEqual({
      ok: true,
      feature: 'sampling',
    });
    expect(mayAsk('s', OFF, { sampling: {} }, 'sampling/createMessage')).toMatchObject({
      ok: false,
      why: 'off',
      reason: expect.stringContaining('set mcpServers.s.clientFeatures.sampling to true'),
    });
    expect(mayAsk('s', ON, {}, 'roots/list')).toMatchObject({
      ok: false,
      why: 'undeclared',
      feature: 'roots',
    });
    expect(mayAsk('s', ON, { roots: true }, 'roots/list')).toMatchObject({ ok: false, why: 'undeclared' });
    expect(mayAsk('s', ON, ON, 'tools/call')).toMatchObject({ ok: false, why: 'unknown' });
  });

  it('declares upstream only what is both enabled and declared; offers legacy upstreams what is enabled', () => {
    expect(relayedCapabilities(OFF, { sampling: {}, elicitation: { form: {} }, roots: {} })).toEqual({
      elicitation: { form: {} },
    });
    expect(relayedCapabilities(ON, { roots: { listChanged: true } })).toEqual({
      roots: { listChanged: true },
    });
    expect(offeredCapabilities(OFF)).toEqual({ elicitation: { form: {}, url: {} } });
    expect(offeredCapabilities({ sampling: false, elicitation: false, roots: false })).toEqual({});
  });

  it('explainMissing: names the setting when off, the capability when undeclared', () => {
    expect(explainMissing('s', OFF, { sampling: {} }, { sampling: {} })).toMatchObject({ why: 'off' });
    expect(explainMissing('s', ON, {}, { roots: {} })).toMatchObject({ why: 'undeclared', feature: 'roots' });
    expect(explainMissing('s', ON, ON, { tasks: {} })).toBeUndefined();
    expect(explainMissing('s', ON, ON, 'junk')).toBeUndefined();
  });

  it('boundClientRequest strips and clips what a person reads, and refuses what is too large', () => {
    const b = boundClientRequest('elicitation/create', {
      message: `Approve\u202e${'x'.repeat(10_000)}`,
      requestedSchema: { type: 'object' },
    });
    expect(b?.message).not.toContain('\u202e');
    expect(String(b?.message).length).toBeLessThanOrEqual(4100);
    expect(b?.requestedSchema).toEqual({ type: 'object' });
    expect(
      boundClientRequest('sampling/createMessage', { messages: ['y'.repeat(300 * 1024)] }),
    ).toBeUndefined();
    expect(boundClientRequest('roots/list', undefined)).toEqual({});
  });
});
