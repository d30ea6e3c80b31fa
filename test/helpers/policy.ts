import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { resultText } from './clients.js';

/** Policy rules and guardrails (#51): a webhook service and clients of both eras, for Node and workerd. */

type Obj = Record<string, unknown>;
export type Era = 'legacy' | 'modern';

export const AWS_KEY = 'AKIAZ3MSKVNNGW4GTQ3X';
export const EMAIL = 'jo.doe@example.com';

/** The operator's policy service: decides by what it is sent, records every body. */
export function startWebhook(): Promise<{ server: Server; port: number; bodies: Obj[] }> {
  const bodies: Obj[] = [];
  const read = (req: IncomingMessage) =>
    new Promise<string>((res) => {
      let s = '';
      req.on('data', (d) => {
        s += String(d);
      });
      req.on('end', () => res(s));
    });
  const server = createServer(async (req, res) => {
    const body = JSON.parse(await read(req)) as Obj;
    bodies.push({ path: req.url, auth: req.headers.authorization, ...body });
    const send = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(text);
    };
    const text = JSON.stringify(body.arguments ?? body.result ?? {});
    switch (req.url) {
      case '/decide':
        if (body.phase === 'request' && text.includes('hook-deny'))
          return send(200, JSON.stringify({ decision: 'deny', reason: 'the hook says no' }));
        if (body.phase === 'request' && text.includes('hook-rewrite'))
          return send(
            200,
            JSON.stringify({ decision: 'modify', arguments: { message: 'rewritten by hook' } }),
          );
        if (body.phase === 'request' && text.includes('hook-badshape'))
          return send(200, JSON.stringify({ decision: 'modify', arguments: { message: 42 } }));
        if (body.phase === 'response' && text.includes('hook-swap'))
          return send(
            200,
            JSON.stringify({
              decision: 'modify',
              result: { content: [{ type: 'text', text: 'swapped by hook' }] },
            }),
          );
        return send(200, JSON.stringify({ decision: 'allow' }));
      case '/slow':
        // Answers, correctly, long after the gateway's deadline.
        setTimeout(() => send(200, JSON.stringify({ decision: 'allow' })), 1500);
        return;
      case '/garbage':
        return send(200, '{"decision": "maybe"');
      case '/status500':
        return send(500, JSON.stringify({ decision: 'allow' }));
      default:
        return send(404, '{}');
    }
  });
  return new Promise((res) =>
    server.listen(0, '127.0.0.1', () =>
      res({ server, port: (server.address() as AddressInfo).port, bodies }),
    ),
  );
}

export interface Caller {
  resources(): Promise<{ uri: string; name: string }[]>;
  asked: Obj[];
  call(
    name: string,
    args?: Obj,
  ): Promise<{ text: string; isError: boolean; meta: Obj; structured?: unknown }>;
  callError(name: string, args?: Obj): Promise<string>;
  list(): Promise<string[]>;
  prompts(): Promise<string[]>;
  prompt(name: string, args?: Record<string, string>): Promise<Obj>;
  read(uri: string): Promise<Obj>;
  close(): Promise<void>;
}

const shape = (r: unknown) => {
  const res = r as {
    content?: { text?: string }[];
    isError?: unknown;
    _meta?: Obj;
    structuredContent?: unknown;
  };
  return {
    text: resultText(res),
    isError: res.isError === true,
    meta: res._meta ?? {},
    structured: res.structuredContent,
  };
};

/** A client of either era that says yes to every approval question, and keeps the questions. */
export async function caller(era: Era, url: string, token: string): Promise<Caller> {
  const asked: Obj[] = [];
  const yes = (params: Obj) => {
    asked.push(params);
    return { action: 'accept', content: { approve: true } };
  };
  const requestInit = { headers: { authorization: `Bearer ${token}` } };
  const caps = { capabilities: { elicitation: { form: {} } } };
  let client: {
    callTool(p: Obj): Promise<unknown>;
    listTools(p?: Obj): Promise<{ tools: { name: string }[]; nextCursor?: string }>;
    listPrompts(): Promise<{ prompts: { name: string }[] }>;
    listResources(): Promise<{ resources: { uri: string; name: string }[] }>;
    getPrompt(p: Obj): Promise<Obj>;
    readResource(p: Obj): Promise<Obj>;
    close(): Promise<void>;
  };
  if (era === 'legacy') {
    const legacy = new LegacyClient({ name: 'policy-v1', version: '1.0.0' }, caps);
    legacy.setRequestHandler(ElicitRequestSchema, async (r) => yes(r.params as Obj) as never);
    await legacy.connect(new LegacyTransport(new URL(url), { requestInit }));
    client = legacy as never;
  } else {
    const modern = new ModernClient(
      { name: 'policy-v2', version: '1.0.0' },
      { ...caps, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    modern.setRequestHandler('elicitation/create', async (r) => yes(r.params as Obj) as never);
    await modern.connect(new ModernTransport(new URL(url), { requestInit }));
    client = modern as never;
  }
  return {
    resources: async () => (await client.listResources()).resources,
    asked,
    call: async (name, args = {}) => shape(await client.callTool({ name, arguments: args })),
    callError: async (name, args = {}) => {
      try {
        const r = await client.callTool({ name, arguments: args });
        return `no error: ${JSON.stringify(r)}`;
      } catch (e) {
        return (e as Error).message;
      }
    },
    list: async () => {
      const names: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        names.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
      } while (cursor);
      return names;
    },
    prompts: async () => (await client.listPrompts()).prompts.map((p) => p.name),
    prompt: (name, args) => client.getPrompt({ name, ...(args ? { arguments: args } : {}) }),
    read: (uri) => client.readResource({ uri }),
    close: () => client.close(),
  };
}

/** The exposed URI of a server's static text resource, if the caller may see it. */
export async function resourceUri(c: Caller, server: string): Promise<string | undefined> {
  // The first server keeps the fixture's URI; the others' are rewritten into their own namespace.
  const uri = server === 'ref' ? 'test://static-text' : `test://${server}.static-text`;
  return (await c.resources()).find((r) => r.uri === uri)?.uri;
}
