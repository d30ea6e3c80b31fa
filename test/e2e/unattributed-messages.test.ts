import { resolve } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resultText } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { ROOT, startTestGateway, type TestGateway } from '../helpers/harness.js';

/**
 * SECURITY G5: a message from an upstream that names no request (a log line, or a question to the
 * client, on stdio) is delivered only when it can be attributed to one caller. A server that logs
 * or asks after answering tenant A must not reach tenant B's call, even when B's is the only call
 * in flight; the question is refused upstream so the server does not hang. On a connection that
 * only ever carried one caller's requests (here a per-subject instance), it is that caller's.
 */
const LINGERING = resolve(ROOT, 'test/fixtures/lingering-stdio.mjs');
const ISS = 'https://issuer.unattributed';
const AUD = 'manifold-unattributed';

type Era = 'legacy' | 'modern';

/** A client that declares elicitation, asks for log lines, and records what reaches it. */
interface Caller {
  logs: unknown[];
  questions: unknown[];
  call(name: string, args?: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

async function caller(era: Era, url: string, token: string): Promise<Caller> {
  const logs: unknown[] = [];
  const questions: unknown[] = [];
  const requestInit = { headers: { authorization: `Bearer ${token}` } };
  if (era === 'legacy') {
    const client = new LegacyClient(
      { name: 'v1-tenant', version: '1.0.0' },
      { capabilities: { elicitation: {} } },
    );
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params);
    });
    client.setRequestHandler(ElicitRequestSchema, (r) => {
      questions.push(r.params);
      return { action: 'accept', content: { ok: true } };
    });
    await client.connect(new LegacyTransport(new URL(url), { requestInit }));
    await client.setLoggingLevel('debug');
    return {
      logs,
      questions,
      call: async (name, args = {}) => resultText(await client.callTool({ name, arguments: args })),
      close: () => client.close(),
    };
  }
  const client = new ModernClient(
    { name: 'v2-tenant', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  client.setNotificationHandler('notifications/message', (n) => {
    logs.push(n.params);
  });
  client.setRequestHandler('elicitation/create', async (r) => {
    questions.push(r.params);
    return { action: 'accept' as const, content: { ok: true } };
  });
  await client.connect(new ModernTransport(new URL(url), { requestInit }));
  return {
    logs,
    questions,
    call: async (name, args = {}) =>
      resultText(
        await client.callTool({
          name,
          arguments: args,
          _meta: { 'io.modelcontextprotocol/logLevel': 'debug' },
        }),
      ),
    close: () => client.close(),
  };
}

describe('49.5: messages that name no request never reach another tenant', () => {
  let gw: TestGateway;
  let mint: (tenant: string, subject: string) => Promise<string>;
  const open: Caller[] = [];
  const as = async (era: Era, tenant: string, subject: string) => {
    const c = await caller(era, gw.url, await mint(tenant, subject));
    open.push(c);
    return c;
  };

  beforeAll(async () => {
    const issuer = await testIssuer(ISS, AUD);
    mint = (tenant, subject) => issuer.mint({ tid: tenant, scope: 'tools:*' }, subject);
    const lingering = { command: process.execPath, args: [LINGERING] };
    gw = await startTestGateway({
      mcpServers: {
        // One child for every tenant (the default).
        shared: lingering,
        // One child for each subject: whatever it says is that subject's.
        own: { ...lingering, isolation: 'per-subject' },
      },
      gateway: { auth: { ...issuer.auth, tenantClaim: 'tid' } },
    });
  });

  afterAll(async () => {
    for (const c of open) await c.close().catch(() => {});
    await gw?.stop();
  });

  for (const [eraA, eraB] of [
    ['legacy', 'modern'],
    ['modern', 'legacy'],
  ] as const) {
    it(`49.5: after tenant A's call (${eraA} client), tenant B's ${eraB} client gets neither A's log line nor the question`, async () => {
      const a = await as(eraA, 'acme', `alice-${eraA}`);
      const b = await as(eraB, 'globex', `bob-${eraB}`);
      const secret = `acme-secret-${eraA}`;
      expect(await a.call('shared__remember', { text: secret })).toBe('remembered');
      // B's call is the only one in flight when the server speaks of A.
      const answer = await b.call('shared__linger');
      // The server heard a refusal rather than waiting for an answer that never comes.
      expect(answer).toMatch(/^question refused: /);
      expect(answer).not.toContain(secret);
      expect(JSON.stringify(b.logs)).not.toContain(secret);
      expect(b.questions).toEqual([]);
      // A, whose call is over, hears nothing of it either.
      expect(JSON.stringify(a.logs)).not.toContain(secret);
      expect(a.questions).toEqual([]);
    });
  }

  for (const era of ['legacy', 'modern'] as const) {
    it(`49.5: on a connection only one caller ever used (per-subject, ${era} client), the log line and the question are that caller's`, async () => {
      const c = await as(era, 'acme', `carol-${era}`);
      expect(await c.call('own__remember', { text: `carol-note-${era}` })).toBe('remembered');
      const answer = await c.call('own__linger');
      expect(answer).toBe('question answered {"action":"accept","content":{"ok":true}}');
      expect(JSON.stringify(c.logs)).toContain(`carol-note-${era}`);
      expect(c.questions).toHaveLength(1);
    });
  }
});
