import { spawn } from 'node:child_process';
import { it } from 'vitest';
import {
  connectClient,
  EVERYTHING,
  startEverythingHttp,
  startTestGateway,
  stopChild,
  waitForPort,
} from '../helpers/harness.js';

it('probe', async () => {
  const http = await startEverythingHttp('streamableHttp');
  const sse = await startEverythingHttp('sse');
  const gw = await startTestGateway({
    mcpServers: { ehttp: { type: 'streamable-http', url: http.url }, esse: { type: 'sse', url: sse.url } },
  });
  const c = await connectClient(gw.url);
  await http.stop();
  await sse.stop();
  const kids = [http, sse].map((s) =>
    spawn(process.execPath, [EVERYTHING, s === http ? 'streamableHttp' : 'sse'], {
      env: { ...process.env, PORT: String(s.port) },
      stdio: 'ignore',
    }),
  );
  await waitForPort(http.port, 10000);
  await waitForPort(sse.port, 10000);
  await new Promise((r) => setTimeout(r, 4000));
  console.log(JSON.stringify(await (await fetch(gw.url.replace('/mcp', '/healthz'))).json()));
  for (const s of ['ehttp', 'esse'])
    console.log(
      s,
      JSON.stringify(
        await c.callTool({ name: s + '__echo', arguments: { message: 'x' } }).catch((e) => String(e)),
      ),
    );
  await new Promise((r) => setTimeout(r, 2000));
  for (const s of ['ehttp', 'esse'])
    console.log(
      s,
      JSON.stringify(
        await c.callTool({ name: s + '__echo', arguments: { message: 'x' } }).catch((e) => String(e)),
      ),
    );
  console.log(JSON.stringify(await (await fetch(gw.url.replace('/mcp', '/healthz'))).json()));
  console.log(
    gw.logs
      .slice(-8)
      .map((l) => JSON.stringify(l))
      .join('\n'),
  );
  await c.close();
  await gw.stop();
  for (const k of kids) await stopChild(k);
}, 60000);
