#!/usr/bin/env node
// Manifold as the client under test of the official conformance suite (#19): the suite runs
//   <node 20> test/conformance/manifold-client.mjs <server url>
// with MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION and, for some scenarios,
// MCP_CONFORMANCE_CONTEXT (JSON). This driver starts a gateway in this process (from dist/: run
// `npm run build` first) with the suite's server as its only upstream, plays the operator and the
// user's browser for the upstream's OAuth (POST /admin/servers/up/login, then the authorization
// URL with manual redirects until the gateway's callback), and drives the upstream through a
// downstream SDK client of the scenario's era (v1 for 2025-11-25, v2 for 2026-07-28):
// tools/list, then a call of every listed tool. Exit 0 once the calls succeeded; exit 1 when the
// gateway refused for good (a rule such as resource-mismatch or iss-mismatch) or nothing worked.
// Nothing from the context (client secrets) is printed; the gateway's own log goes to stderr,
// redacted and at warn level.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const dist = (p) => import(pathToFileURL(join(ROOT, 'dist', p)).href);

const serverUrl = process.argv.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const version = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? '2025-11-25';
const ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}');
const CIMD_URL = 'https://conformance-test.local/client-metadata.json';
const ROUNDS = 6;
// Give up before the suite's own timeout (the test runs it with 60 s), so a stuck flow ends with
// this driver's diagnosis rather than a kill.
const DEADLINE = Date.now() + Number(process.env.MANIFOLD_CLIENT_DEADLINE_MS ?? 40_000);

const say = (line) => process.stderr.write(`manifold-client: ${line}\n`);

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** The upstream's `auth` from the scenario's context (design §5, "Conformance"). */
function authFor() {
  if (!scenario.startsWith('auth/')) return undefined;
  if (scenario === 'auth/client-credentials-basic') {
    return {
      mode: 'gateway',
      grant: 'client_credentials',
      clientId: ctx.client_id,
      clientSecret: ctx.client_secret,
    };
  }
  if (ctx.client_id && ctx.client_secret) {
    return {
      mode: 'gateway',
      clientId: ctx.client_id,
      clientSecret: ctx.client_secret,
      ...(ctx.issuer ? { issuer: ctx.issuer } : {}),
    };
  }
  return { mode: 'gateway' };
}

/** Synthesised arguments for a tool: enough for the suite's tools (numbers, strings, booleans). */
function argumentsFor(tool) {
  const args = {};
  const schema = tool.inputSchema ?? {};
  for (const name of schema.required ?? []) {
    const type = schema.properties?.[name]?.type;
    args[name] =
      type === 'number' || type === 'integer'
        ? 1
        : type === 'boolean'
          ? true
          : type === 'object'
            ? {}
            : type === 'array'
              ? []
              : 'x';
  }
  return args;
}

async function main() {
  const { parseConfigObject } = await dist('src/config/load.js');
  const { createJsonLogger } = await dist('src/lib/log.js');
  const { startGateway } = await dist('deploy/node/http/serve.js');

  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const redirectUri = `${origin}/oauth/callback`;
  const auth = authFor();
  const raw = {
    mcpServers: {
      up: {
        url: serverUrl,
        protocol: version,
        prefix: false,
        clientFeatures: { elicitation: true, sampling: true, roots: true },
        ...(auth ? { auth } : {}),
      },
    },
    gateway: {
      port,
      allowedHosts: ['localhost', '127.0.0.1'],
      store: false,
      oauth: { secret: randomBytes(32).toString('base64url'), clientMetadataUrl: CIMD_URL, redirectUri },
    },
  };
  const parsed = parseConfigObject(raw, process.env);
  if (!parsed.ok) {
    say(`config refused: ${JSON.stringify(parsed.errors.map((e) => e.path ?? e))}`);
    return 1;
  }
  const secrets = [...parsed.secrets, ...[ctx.client_secret, ctx.private_key_pem].filter(Boolean)];
  const log = createJsonLogger({
    level: 'warn',
    redact: secrets,
    write: (line) => process.stderr.write(`${line}\n`),
  });
  const running = await startGateway({
    config: parsed.config,
    log,
    version: 'conformance',
    secrets,
    waitReady: false,
    backoff: { baseMs: 200, capMs: 1000, jitter: 0.1 },
  });
  try {
    return await drive(running.url, origin, redirectUri);
  } finally {
    await running.stop().catch(() => {});
  }
}

async function health(origin) {
  const r = await fetch(`${origin}/healthz`);
  const body = await r.json();
  return (body.upstreams ?? []).find((u) => u.name === 'up') ?? {};
}

/**
 * Waits until the upstream is ready, or refused, or needs a login *after an attempt to connect*:
 * an operator looks at /healthz once the server was tried, so the login starts from what the
 * server's 401 said (its challenge and scope), not from a state that merely has no token yet.
 */
async function settle(origin, ms = 10_000) {
  const until = Math.min(Date.now() + ms, DEADLINE);
  let last = {};
  while (Date.now() < until) {
    last = await health(origin);
    const a = last.auth?.state;
    if (last.state === 'ready' || a === 'refused') return last;
    if (a === 'needs-login' && (last.state === 'backoff' || last.state === 'failed')) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  return last;
}

/** The user's browser: follows the AS's redirects (manual) to the gateway's callback, then opens it. */
async function browse(url, redirectUri) {
  const cookies = new Map();
  for (let hop = 0; hop < 10; hop++) {
    const cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const r = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const line of r.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      if (at > 0) cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
    }
    const location = r.headers.get('location');
    await r.body?.cancel();
    if (!location) {
      say(`the authorization server answered ${r.status} without a redirect`);
      return false;
    }
    const next = new URL(location, url).href;
    if (next.startsWith(redirectUri)) {
      const cb = await fetch(next, { redirect: 'manual' });
      const text = await cb.text();
      // The gateway's refusal is a rule name in text/plain: safe to show.
      if (cb.status !== 200) say(`callback answered ${cb.status}: ${text.slice(0, 80)}`);
      return cb.status === 200;
    }
    url = next;
  }
  say('too many redirects');
  return false;
}

async function login(origin, redirectUri) {
  const r = await fetch(`${origin}/admin/servers/up/login`, { method: 'POST' });
  const body = await r.json().catch(() => ({}));
  if (r.status !== 200 || typeof body.authorizationUrl !== 'string') {
    say(`login refused: ${r.status} ${body.rule ?? ''}`);
    return false;
  }
  return browse(body.authorizationUrl, redirectUri);
}

const CAPABILITIES = { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } };
const SAMPLED = { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'manifold-conformance' };

async function connect(url) {
  if (version === '2026-07-28') {
    const client = new ModernClient(
      { name: 'manifold-conformance', version: '1.0.0' },
      { capabilities: CAPABILITIES, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    client.setRequestHandler('elicitation/create', (request) => acceptDefaults(request.params));
    client.setRequestHandler('sampling/createMessage', () => SAMPLED);
    client.setRequestHandler('roots/list', () => ({ roots: [] }));
    await client.connect(new ModernTransport(new URL(url)));
    return client;
  }
  const client = new LegacyClient(
    { name: 'manifold-conformance', version: '1.0.0' },
    { capabilities: CAPABILITIES },
  );
  client.setRequestHandler(ElicitRequestSchema, (request) => acceptDefaults(request.params));
  client.setRequestHandler(CreateMessageRequestSchema, () => SAMPLED);
  client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [] }));
  await client.connect(new LegacyTransport(new URL(url)));
  return client;
}

/** Accepts an elicitation with the schema's defaults (SEP-1034), the way a user pressing OK would. */
function acceptDefaults(params) {
  const content = {};
  for (const [name, field] of Object.entries(params?.requestedSchema?.properties ?? {})) {
    if (field && typeof field === 'object' && 'default' in field) content[name] = field.default;
  }
  return { action: 'accept', content };
}

/** tools/list, then every tool once. Throws when the gateway itself could not be reached. */
async function exercise(url) {
  const client = await connect(url);
  try {
    const { tools } = await client.listTools();
    // A scenario may name its calls and their exact arguments (the SEP-2243 header encodings).
    const calls = Array.isArray(ctx.toolCalls)
      ? ctx.toolCalls
      : tools.map((tool) => ({ name: tool.name, arguments: argumentsFor(tool) }));
    for (const call of calls) {
      try {
        const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
        if (result.isError) say(`${call.name}: isError`);
      } catch (e) {
        say(`${call.name}: ${String(e?.message ?? e).slice(0, 160)}`);
      }
    }
  } finally {
    await client.close().catch(() => {});
  }
}

async function drive(url, origin, redirectUri) {
  for (let round = 0; round < ROUNDS && Date.now() < DEADLINE; round++) {
    const h = await settle(origin);
    if (h.auth?.state === 'refused') {
      say(`refused: ${h.auth.rule ?? 'unknown rule'}`);
      return 1;
    }
    if (h.auth?.state === 'needs-login') {
      if (!(await login(origin, redirectUri))) return 1;
      continue;
    }
    if (h.state !== 'ready') {
      say(`upstream ${h.state ?? 'absent'}${h.rule ? ` (${h.rule})` : ''}`);
      continue;
    }
    try {
      await exercise(url);
    } catch (e) {
      say(`the gateway failed: ${String(e?.message ?? e).slice(0, 160)}`);
      continue;
    }
    // A refused call (401 after an issuer change, 403 for a scope) leaves the server needing a
    // login: go round again. Otherwise the upstream was driven: the verdict is the suite's.
    const after = await health(origin);
    if (after.auth?.state !== 'needs-login' && after.auth?.state !== 'refused') return 0;
    await new Promise((r) => setTimeout(r, 200));
  }
  return 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    say(`crashed: ${String(e?.message ?? e).slice(0, 200)}`);
    process.exit(1);
  },
);
