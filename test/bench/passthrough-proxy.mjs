#!/usr/bin/env node
// B1: the physical limit of a Node proxy here. node:http in front of an undici Pool, no MCP logic.
import { createServer } from 'node:http';
import { Pool } from 'undici';

const target = new URL(process.env.TARGET);
const pool = new Pool(target.origin, { connections: 64, pipelining: 1 });
const server = createServer(async (req, res) => {
  const headers = { ...req.headers };
  delete headers.host;
  delete headers.connection;
  try {
    const up = await pool.request({ method: req.method, path: target.pathname, headers, body: req });
    const out = { ...up.headers };
    delete out.connection;
    delete out['keep-alive'];
    delete out['transfer-encoding'];
    res.writeHead(up.statusCode, out);
    for await (const chunk of up.body) res.write(chunk);
    res.end();
  } catch {
    res.writeHead(502).end();
  }
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
