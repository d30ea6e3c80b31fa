import { resolve } from 'node:path';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern } from '../helpers/clients.js';
import { type Fixture, type FixtureEvent, health, startFixture } from '../helpers/fixture.js';
import { eventually, ROOT, startTestGateway, type TestGateway } from '../helpers/harness.js';

// Safe resend after a dropped upstream session (#14), end to end: a client of either era, the
// gateway in this process, and the scripted legacy upstream (sessions, no standalone GET stream,
// so the gateway only finds out about a restart on its next POST), which is killed and started
// again on the same port and so forgets every session. Each case counts the calls each process saw.

const SCRIPTED = resolve(ROOT, 'test/fixtures/scripted-http.mjs');
const ENV = { SCRIPTED_SLOW: '1', SCRIPTED_NO_GET: '1' };

type Result = { content?: { type: string; text?: string }[]; isError?: boolean };

interface Rig {
  fixture: Fixture;
  gw: TestGateway;
  client: AnyHandle;
  /** Kills the upstream (SIGKILL) and starts a new process on its port; `fixture` is the new one. */
  restart(): Promise<Fixture>;
  kill(): Promise<void>;
  start(): Promise<Fixture>;
}

const running: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.allSettled(running.splice(0).map((r) => r.stop()));
});

async function rig(era: 'legacy' | 'modern', server: Record<string, unknown> = {}): Promise<Rig> {
  const first = await startFixture(SCRIPTED, ENV);
  const port = first.port;
  const processes = [first];
  const gw = await startTestGateway({
    gateway: { allowedHosts: [`127.0.0.1:${port}`] },
    mcpServers: { s: { url: first.url, risk: { slow: 'read', echo: 'read' }, ...server } },
  });
  const client = era === 'legacy' ? await connectLegacy(gw.url) : await connectModern(gw.url);
  const r: Rig = {
    fixture: first,
    gw,
    client,
    async kill() {
      const child = r.fixture.child;
      if (child.exitCode !== null || child.signalCode !== null) return;
      await new Promise<void>((done) => {
        child.once('exit', () => done());
        child.kill('SIGKILL');
      });
    },
    async start() {
      r.fixture = await startFixture(SCRIPTED, { ...ENV, PORT: String(port) });
      processes.push(r.fixture);
      return r.fixture;
    },
    async restart() {
      await r.kill();
      return r.start();
    },
  };
  running.push({
    async stop() {
      await client.close().catch(() => {});
      await gw.stop();
      await Promise.all(processes.map((p) => p.stop()));
    },
  });
  return r;
}

async function callTool(
  h: AnyHandle,
  name: string,
  args: Record<string, unknown>,
  options: { signal?: AbortSignal; onprogress?: (p: Progress) => void } = {},
): Promise<Result> {
  const opts = { timeout: 20_000, ...options };
  if (h.era === 'legacy') {
    return (await h.client.callTool({ name, arguments: args }, CallToolResultSchema, opts)) as Result;
  }
  return (await h.client.callTool({ name, arguments: args }, opts)) as unknown as Result;
}

const textOf = (r: Result): string => (r.content ?? []).map((c) => c.text ?? '').join('\n');

/** What a failed call told the client: the error's message, or an error result's text. */
const failureOf = (p: Promise<Result>): Promise<string> =>
  p.then(
    (r) => (r.isError ? textOf(r) : `resolved: ${textOf(r)}`),
    (e: unknown) => String((e as Error)?.message ?? e),
  );

const calls = (f: Fixture, tag?: string): FixtureEvent[] =>
  f.events.filter((e) => e.event === 'call' && (tag === undefined || e.tag === tag));

const sessionOf = (f: Fixture): unknown => f.events.find((e) => e.event === 'initialize')?.session;

const logs = (gw: TestGateway, event: string) => gw.logs.filter((l) => l.event === event && l.server === 's');

describe.each(['legacy', 'modern'] as const)(
  '%s client: resend after a dropped upstream session (#14)',
  (era) => {
    it('1: after the upstream restarted, a call of a non-read tool gets 404 and is resent once on a new session, the listing kept', async () => {
      const r = await rig(era);
      const before = r.client.listChanged.count;
      const fresh = await r.restart();
      const res = await callTool(r.client, 's__sized', { tag: 'after-restart', bytes: 3 });
      expect(res.isError).toBeFalsy();
      expect(textOf(res)).toBe('sss');
      // Exactly one call reached the new process, on the session it gave the gateway.
      const seen = calls(fresh);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.session).toBe(sessionOf(fresh));
      const resent = logs(r.gw, 'upstream.call_resent');
      expect(resent).toEqual([
        expect.objectContaining({ reason: 'session-expired', tool: 'sized', resend: 1 }),
      ]);
      // Never the arguments.
      expect(JSON.stringify(resent)).not.toContain('after-restart');
      // Renewed in place: the upstream never went unavailable, so no client saw its tools go.
      expect(logs(r.gw, 'upstream.unavailable')).toEqual([]);
      expect(logs(r.gw, 'upstream.ready').at(-1)).toMatchObject({ renewed: true });
      expect((await health(r.gw)).s).toMatchObject({ state: 'ready' });
      await new Promise((done) => setTimeout(done, 200));
      expect(r.client.listChanged.count).toBe(before);
    });

    it('2: a read tool in flight when the upstream dies is resent once it is back, and answers', async () => {
      const r = await rig(era);
      const old = r.fixture;
      const pending = callTool(r.client, 's__slow', { tag: 'inflight-read', delayMs: 600 });
      await eventually(() => calls(old, 'inflight-read').length === 1, 'the call reached the upstream');
      const fresh = await r.restart();
      const res = await pending;
      expect(res.isError).toBeFalsy();
      expect(textOf(res)).toBe('slow:inflight-read');
      // Once per process: the first was cut off, the second answered.
      expect(calls(old, 'inflight-read')).toHaveLength(1);
      expect(calls(fresh, 'inflight-read')).toHaveLength(1);
      expect(logs(r.gw, 'upstream.call_resent')).toEqual([
        expect.objectContaining({ reason: 'connection-lost', tool: 'slow', resend: 1 }),
      ]);
    });

    it('3: an undeclared tool in flight when the upstream dies is outcome unknown, and never resent', async () => {
      const r = await rig(era);
      const old = r.fixture;
      const pending = failureOf(callTool(r.client, 's__hang', { tag: 'inflight-hang' }));
      await eventually(() => calls(old, 'inflight-hang').length === 1, 'the call reached the upstream');
      const fresh = await r.restart();
      const message = await pending;
      expect(message).toContain('outcome is unknown');
      expect(message).toContain('not classified read');
      expect(message).toContain('check whether it took effect before calling it again');
      await eventually(async () => (await health(r.gw)).s?.state === 'ready', 'the gateway reconnected');
      // The new process works and saw no second call.
      expect(textOf(await callTool(r.client, 's__echo', { tag: 'probe' }))).toBe('echo:probe');
      expect(calls(fresh, 'inflight-hang')).toHaveLength(0);
      expect(logs(r.gw, 'upstream.call_resent')).toEqual([]);
    });

    it('4: with retry 0, the 404 after a restart is not resent: the call did not run, and the next one works', async () => {
      const r = await rig(era, { retry: 0 });
      const fresh = await r.restart();
      const message = await failureOf(callTool(r.client, 's__sized', { tag: 'no-resend', bytes: 3 }));
      expect(message).toContain('did not run');
      expect(message).toContain('retry is 0');
      expect(message).not.toContain('outcome is unknown');
      expect(calls(fresh)).toHaveLength(0);
      expect(logs(r.gw, 'upstream.call_resent')).toEqual([]);
      // The session was renewed all the same: calling again is safe, and works.
      expect(textOf(await callTool(r.client, 's__sized', { tag: 'again', bytes: 2 }))).toBe('ss');
      expect(calls(fresh)).toHaveLength(1);
      expect(logs(r.gw, 'upstream.unavailable')).toEqual([]);
    });

    it('5: a read tool whose upstream died is not resent once the client has cancelled the call', async () => {
      const r = await rig(era);
      const old = r.fixture;
      const ac = new AbortController();
      const pending = failureOf(
        callTool(r.client, 's__slow', { tag: 'cancelled-read', delayMs: 600 }, { signal: ac.signal }),
      );
      await eventually(() => calls(old, 'cancelled-read').length === 1, 'the call reached the upstream');
      await r.kill();
      // The gateway found the upstream down and waits to resend; the client gives up meanwhile.
      await eventually(() => logs(r.gw, 'upstream.unavailable').length > 0, 'the upstream reported down');
      ac.abort(new Error('the user gave up'));
      expect(await pending).not.toMatch(/^resolved/);
      const fresh = await r.start();
      await eventually(async () => (await health(r.gw)).s?.state === 'ready', 'the gateway reconnected');
      await new Promise((done) => setTimeout(done, 200));
      expect(calls(fresh)).toHaveLength(0);
      expect(logs(r.gw, 'upstream.call_resent')).toEqual([]);
    });
  },
);
