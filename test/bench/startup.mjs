// Process start to listening (run.mjs's `startup` section): `node <cli> serve` spawned afresh each
// run, timed from spawn to its `gateway.listening` log line, for the embedded default config
// (stdio servers, SQLite) and for a JWT-auth config with an HTTP upstream. The upstreams are not
// waited for: the port is open before discovery starts. Also the floor: `node -e` printing one
// line, Node's own start.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median } from './processes.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function timeToLine(args, needle, cwd, { node = process.execPath, env } = {}) {
  return new Promise((res, rej) => {
    const t0 = performance.now();
    const child = spawn(node, args, {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      rej(new Error(`no ${needle} within 20 s:\n${out.slice(-2000)}`));
    }, 20_000);
    const on = (d) => {
      out += d;
      if (!out.includes(needle)) return;
      const ms = performance.now() - t0;
      clearTimeout(timer);
      child.stdout.off('data', on);
      child.stderr.off('data', on);
      child.once('exit', () => res(ms));
      child.kill('SIGTERM');
    };
    child.stdout.on('data', on);
    child.stderr.on('data', on);
    child.once('error', rej);
  });
}

/**
 * @param {{ cli?: string, runs?: number }} options
 * @returns {Promise<{ floorMs: number, configs: Record<string, { medianMs: number, minMs: number, samplesMs: number[] }>, pass: boolean }>}
 */
export async function startupBench({ cli = join(ROOT, 'dist/manifold.js'), runs = 9 } = {}) {
  const tmp = mkdtempSync(join(tmpdir(), 'manifold-startup-'));
  try {
    // A key set for the auth config; its private half is never needed, nothing is called.
    const { generateKeyPair, exportJWK } = await import('jose');
    const { publicKey } = await generateKeyPair('ES256', { extractable: true });
    writeFileSync(
      join(tmp, 'jwks.json'),
      JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k', alg: 'ES256', use: 'sig' }] }),
    );
    const configs = {
      default: join(ROOT, 'examples/manifold.json'),
      auth: join(tmp, 'auth.json'),
    };
    writeFileSync(
      configs.auth,
      JSON.stringify({
        mcpServers: { remote: { url: 'http://127.0.0.1:9/mcp' } },
        gateway: {
          store: { path: join(tmp, 'state.db') },
          allowedHosts: ['127.0.0.1:9'],
          auth: { issuer: 'https://issuer.test', audience: 'manifold', jwksFile: join(tmp, 'jwks.json') },
        },
      }),
    );
    const floor = [];
    const samples = { default: [], auth: [] };
    // Interleaved, so a burst of load on the machine hits every series alike.
    for (let i = 0; i < runs; i++) {
      floor.push(await timeToLine(['-e', 'console.log("up")'], 'up', tmp));
      for (const [name, path] of Object.entries(configs)) {
        samples[name].push(
          await timeToLine([cli, 'serve', '--config', path, '--port', '0'], '"gateway.listening"', ROOT),
        );
      }
    }
    const round = (x) => Math.round(x * 10) / 10;
    const result = {
      floorMs: round(median(floor)),
      configs: Object.fromEntries(
        Object.entries(samples).map(([name, xs]) => [
          name,
          { medianMs: round(median(xs)), minMs: round(Math.min(...xs)), samplesMs: xs.map(Math.round) },
        ]),
      ),
    };
    result.pass = Object.values(result.configs).every((c) => c.medianMs < 200);
    return result;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
