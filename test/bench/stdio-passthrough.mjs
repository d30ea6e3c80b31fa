#!/usr/bin/env node
// S1: the floor of a Node proxy in front of a stdio MCP server (#18). node:http in, the body parsed
// once, the request's id swapped for the proxy's own, one JSON line to the child's stdin; answers
// routed back by id. No MCP logic: the child's own initialize result is answered to every
// initialize, notifications get 202, and one fake session id is handed out.
//   CHILD  the command line of the stdio server (JSON array), e.g. ["node", "fast-upstream.mjs", "--stdio"]
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';

const [cmd, ...args] = JSON.parse(process.env.CHILD);
const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
child.stdout.setEncoding('utf8');
const waiting = new Map();
let seq = 0;
let buffer = '';
child.stdout.on('data', (chunk) => {
  let start = 0;
  for (let nl = chunk.indexOf('\n'); nl !== -1; nl = chunk.indexOf('\n', start)) {
    const line = buffer + chunk.slice(start, nl);
    buffer = '';
    start = nl + 1;
    if (!line) continue;
    const message = JSON.parse(line);
    const w = waiting.get(message.id);
    if (!w) continue;
    waiting.delete(message.id);
    w(message);
  }
  buffer += chunk.slice(start);
});
const send = (method, params) =>
  new Promise((resolve) => {
    const id = ++seq;
    waiting.set(id, resolve);
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
  });

const init = await send('initialize', {
  protocolVersion: '2025-11-25',
  capabilities: {},
  clientInfo: { name: 'stdio-passthrough', version: '1' },
});
child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);

const server = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (d) => {
    body += d;
  });
  req.on('end', async () => {
    const message = JSON.parse(body);
    const headers = { 'content-type': 'application/json', 'mcp-session-id': 'passthrough' };
    if (message.id === undefined) {
      res.writeHead(202).end();
      return;
    }
    const answer = message.method === 'initialize' ? init : await send(message.method, message.params ?? {});
    answer.id = message.id;
    res.writeHead(200, headers).end(JSON.stringify(answer));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
