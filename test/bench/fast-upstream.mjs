#!/usr/bin/env node
// The fast upstream for benchmarks: MCP over streamable HTTP in JSON response mode (or stdio with
// --stdio), an `echo` tool plus TOOLS-1 small tools (BIG=1: large schemas). Hand-rolled JSON-RPC so
// that the upstream costs as little as possible and the proxies' own cost is what is measured.
// Prints its port on stdout (HTTP mode). MODERN=1 also answers server/discover as a 2026-07-28
// server, so the gateway speaks the stateless revision to it (results then carry resultType).
// BIG_BYTES=N also lists `big`, whose result is one text block of N characters (ASCII lines;
// `arguments.bytes` asks for another size): built once per size and sent pre-serialized (#18).
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';

const count = Number(process.env.TOOLS ?? 1);
const big = process.env.BIG === '1';
const prefix = process.env.TOOL_PREFIX ?? 'tool';
const tools = [
  {
    name: 'echo',
    description: 'Echoes the message.',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
  },
];
for (let i = 1; i < count; i++) {
  const properties = {};
  const fields = big ? 10 : 1;
  for (let f = 0; f < fields; f++) {
    properties[`field_${f}`] = big
      ? {
          type: 'string',
          description: `Field ${f} of ${prefix}_${i}: ${'details '.repeat(12)}`,
          enum: ['a', 'b', 'c', 'd'],
        }
      : { type: 'string' };
  }
  tools.push({
    name: `${prefix}_${i}`,
    description: `Tool ${i} of this benchmark upstream.`,
    inputSchema: { type: 'object', properties, required: ['field_0'] },
  });
}
const modern = process.env.MODERN === '1';
const bigBytes = Number(process.env.BIG_BYTES ?? 0);
if (bigBytes > 0) {
  tools.push({
    name: 'big',
    description: 'Answers one text block of `bytes` characters.',
    inputSchema: { type: 'object', properties: { bytes: { type: 'integer' } } },
  });
}
/** The serialized result of `big`, per size (a few at most). */
const bigResults = new Map();
function bigResult(n) {
  let json = bigResults.get(n);
  if (json === undefined) {
    const line = 'line 0000000: the quick brown fox jumps over the lazy dog, 0123456789.\n';
    const lines = [];
    for (let at = 0, i = 0; at < n; at += line.length, i++)
      lines.push(`line ${String(i).padStart(7, '0')}${line.slice(12)}`);
    const text = lines.join('').slice(0, n);
    const result = { content: [{ type: 'text', text }] };
    if (modern) result.resultType = 'complete';
    json = JSON.stringify(result);
    if (bigResults.size >= 4) bigResults.clear();
    bigResults.set(n, json);
  }
  return json;
}
if (bigBytes > 0) bigResult(bigBytes);
const listResult = JSON.stringify(
  modern ? { tools, resultType: 'complete', ttlMs: 0, cacheScope: 'public' } : { tools },
);

const complete = (r) => (modern ? { ...r, resultType: 'complete' } : r);

function answer(msg) {
  switch (msg.method) {
    case 'initialize':
      return {
        protocolVersion: msg.params?.protocolVersion ?? '2025-06-18',
        capabilities: { tools: {}, prompts: {}, resources: {} },
        serverInfo: { name: 'fast-upstream', version: '1.0.0' },
      };
    case 'ping':
      return {};
    case 'server/discover':
      if (!modern) return undefined;
      return {
        resultType: 'complete',
        supportedVersions: ['2026-07-28'],
        capabilities: { tools: {}, prompts: {}, resources: {} },
        ttlMs: 0,
        cacheScope: 'public',
      };
    case 'tools/list':
      return null; // pre-serialized below
    case 'tools/call': {
      const content = [{ type: 'text', text: String(msg.params?.arguments?.message ?? '') }];
      return modern ? { content, resultType: 'complete' } : { content };
    }
    // One prompt and one resource, for the bench rows that price prompts/get and resources/read.
    case 'prompts/list':
      return complete({ prompts: [{ name: 'greet', description: 'Greets.', arguments: [{ name: 'who' }] }] });
    case 'resources/list':
      return complete({ resources: [{ uri: 'bench://doc', name: 'doc', mimeType: 'text/plain' }] });
    case 'resources/templates/list':
      return complete({ resourceTemplates: [] });
    case 'prompts/get': {
      const who = String(msg.params?.arguments?.who ?? 'you');
      return complete({ messages: [{ role: 'user', content: { type: 'text', text: `hello ${who}` } }] });
    }
    case 'resources/read':
      return complete({
        contents: [{ uri: String(msg.params?.uri), mimeType: 'text/plain', text: 'hello' }],
      });
    default:
      return undefined;
  }
}

function reply(msg) {
  if (msg.id === undefined) return undefined;
  if (msg.method === 'tools/list')
    return `{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":${listResult}}`;
  if (bigBytes > 0 && msg.method === 'tools/call' && msg.params?.name === 'big') {
    const n = Math.min(256 * 1048576, Math.max(0, Number(msg.params.arguments?.bytes ?? bigBytes) || 0));
    return `{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":${bigResult(n)}}`;
  }
  const result = answer(msg);
  if (result === undefined) {
    return JSON.stringify({
      jsonrpc: '2.0',
      id: msg.id,
      error: { code: -32601, message: 'Method not found' },
    });
  }
  return JSON.stringify({ jsonrpc: '2.0', id: msg.id, result });
}

if (process.argv.includes('--stdio')) {
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    if (!line.trim()) return;
    const out = reply(JSON.parse(line));
    if (out) process.stdout.write(`${out}\n`);
  });
  rl.on('close', () => process.exit(0));
} else {
  const server = createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const out = reply(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      if (!out) {
        res.writeHead(202).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
      res.end(out);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
    process.stdout.write(`${server.address().port}\n`);
  });
}
