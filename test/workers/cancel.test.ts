import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceHttp } from '../helpers/clients.js';
import { eventually, ROOT, stopChild } from '../helpers/harness.js';
import { modernMeta, modernRequest, standardHeaders } from '../helpers/modern.js';
import { type RunningWorker, startWorker } from '../helpers/workerd.js';

/**
 * A modern (2026-07-28) client cancels a call by closing its request (patterns/cancellation). On
 * Workers that close must reach the upstream in both places a call runs: the isolate (a modern
 * upstream, fetched directly) and the upstream's Durable Object (a legacy upstream, whose session
 * lives there). Each upstream's wait tool logs "started", then "cancelled" once its own request is
 * cancelled; the gateway's call timeout (60 s) is far beyond these waits, so a "cancelled" line
 * can only come from the client's close.
 *
 * Two ways a close reaches the Worker:
 * - the answer is a stream (the call has a progress token): workerd fails the next write to the
 *   closed connection, which cancels the stream and (with `enable_request_signal`) aborts the
 *   request's signal; here the test client really closes its HTTP request.
 * - the answer is still pending as JSON: nothing is written, and local workerd's HTTP server does
 *   not notice the close; on Cloudflare the edge cancels the Worker's request, which aborts its
 *   signal only with `enable_request_signal`. A caller Worker in front (service binding) plays the
 *   edge here: it cancels its request to the gateway when the test tells it its client went away.
 */
describe('workers: a modern client closing its request cancels the upstream call', () => {
  let dir: string;
  let legacyUp: ChildProcess;
  let legacyPort: number;
  let modernUp: Awaited<ReturnType<typeof startReferenceHttp>>;
  let control: Server;
  /** The front Worker's pending "tell me when my client goes away" requests. */
  const waiting: ServerResponse[] = [];
  let direct: RunningWorker;
  let fronted: RunningWorker;
  const workers: RunningWorker[] = [];
  const legacyLog = () => join(dir, 'legacy.log');
  const modernLog = () => join(dir, 'modern.log');
  const lines = (file: string) =>
    existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];

  /** The caller in front: a request with x-test-cancel-when is cancelled when that URL answers. */
  const FRONT = `export default {
    async fetch(request, env) {
      const when = request.headers.get('x-test-cancel-when');
      if (!when) return env.GATEWAY.fetch(request);
      const headers = new Headers(request.headers);
      headers.delete('x-test-cancel-when');
      const ac = new AbortController();
      fetch(when).then(() => ac.abort(new Error('the client went away')), () => {});
      const body = await request.text();
      return env.GATEWAY.fetch(request.url, { method: request.method, headers, body, signal: ac.signal });
    },
  };`;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-wcancel-'));
    legacyUp = spawn(process.execPath, [join(ROOT, 'test/fixtures/wait-http.mjs')], {
      env: { ...process.env, WAIT_LOG: legacyLog() },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    legacyPort = await new Promise<number>((res, rej) => {
      legacyUp.once('exit', (code) => rej(new Error(`wait-http exited with ${code}`)));
      legacyUp.stdout?.once('data', (d) => res(Number(String(d).trim())));
    });
    legacyUp.stdout?.resume();
    modernUp = await startReferenceHttp({ REF_WAIT_LOG: modernLog() });
    control = createServer((_req, res) => {
      waiting.push(res);
    });
    await new Promise<void>((r) => control.listen(0, '127.0.0.1', r));
    const config = {
      mcpServers: {
        old: { url: `http://127.0.0.1:${legacyPort}/mcp` },
        ref: { url: modernUp.url },
      },
      gateway: {
        allowedHosts: [`127.0.0.1:${legacyPort}`, new URL(modernUp.url).host],
        auth: false,
        logLevel: 'error',
      },
    };
    direct = await startWorker({ config });
    fronted = await startWorker({ config, front: FRONT });
    workers.push(direct, fronted);
  });

  afterAll(async () => {
    for (const res of waiting.splice(0)) res.end();
    control?.close();
    control?.closeAllConnections();
    for (const w of workers) await w.stop().catch(() => {});
    if (legacyUp) await stopChild(legacyUp);
    await modernUp?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Calls `tool` through `w` and waits for the upstream's "started"; `close` then ends the call
   * from the client's side; the upstream must log "cancelled".
   */
  async function cancelMidCall(
    w: RunningWorker,
    tool: string,
    log: string,
    how: { stream: boolean; close: (ac: AbortController) => void; headers?: Record<string, string> },
  ) {
    // A cold deployment lists a server once its object has verified it.
    await eventually(async () => {
      const listed = await modernRequest(w.url, 'tools/list');
      return ((listed.body.result?.tools ?? []) as { name: string }[]).some((t) => t.name === tool);
    }, `${tool} listed`);
    writeFileSync(log, '');
    const ac = new AbortController();
    let pending: Promise<unknown>;
    if (how.stream) {
      // The answer streams: the close comes once the client has read progress from it.
      const params = { name: tool, arguments: {}, _meta: { ...modernMeta(), progressToken: 'p' } };
      const res = await fetch(w.url, {
        method: 'POST',
        headers: standardHeaders('tools/call', params),
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }),
        signal: ac.signal,
      });
      expect(res.headers.get('content-type')).toContain('text/event-stream');
      const reader = res.body!.getReader();
      let seen = '';
      while (!seen.includes('notifications/progress')) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended before any progress: ${seen}`);
        seen += new TextDecoder().decode(value);
      }
      pending = reader.read().catch((e: unknown) => e);
    } else {
      pending = modernRequest(
        w.url,
        'tools/call',
        { name: tool, arguments: {} },
        { signal: ac.signal, ...(how.headers ? { headers: how.headers } : {}) },
      ).catch((e: unknown) => e);
    }
    await eventually(() => lines(log).includes('started'), `${tool} started upstream`);
    how.close(ac);
    await eventually(() => lines(log).includes('cancelled'), `${tool} cancelled upstream`);
    expect(lines(log)).toEqual(['started', 'cancelled']);
    await pending;
  }

  const closeRequest = { stream: true, close: (ac: AbortController) => ac.abort() };
  const edgeCancels = () => ({
    stream: false,
    headers: { 'x-test-cancel-when': `http://127.0.0.1:${(control.address() as { port: number }).port}/` },
    close: () => {
      for (const res of waiting.splice(0)) res.end();
    },
  });

  it('streamed answer, modern upstream called from the isolate: closing the request cancels the upstream request', async () => {
    await cancelMidCall(direct, 'ref__test_wait_cancel', modernLog(), closeRequest);
  });

  it("streamed answer, legacy upstream called in its Durable Object: closing the request reaches the object's call, which cancels upstream", async () => {
    const before = await direct.objectRequests('UPSTREAMS', 'old');
    await cancelMidCall(direct, 'old__wait', legacyLog(), closeRequest);
    expect(await direct.objectRequests('UPSTREAMS', 'old')).toBeGreaterThan(before);
  });

  it('JSON answer pending, modern upstream called from the isolate: the cancelled request cancels the upstream request', async () => {
    await cancelMidCall(fronted, 'ref__test_wait_cancel', modernLog(), edgeCancels());
  });

  it("JSON answer pending, legacy upstream called in its Durable Object: the cancelled request reaches the object's call, which cancels upstream", async () => {
    const before = await fronted.objectRequests('UPSTREAMS', 'old');
    await cancelMidCall(fronted, 'old__wait', legacyLog(), edgeCancels());
    expect(await fronted.objectRequests('UPSTREAMS', 'old')).toBeGreaterThan(before);
  });
});
