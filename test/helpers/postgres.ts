/**
 * Postgres for the tests (#15): the run's one cluster (test/setup/global.ts), on which each test
 * file makes databases of its own.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';
import { createDatabase } from '../setup/postgres-cluster.mjs';
import { type AnyHandle, connectLegacy, connectModern } from './clients.js';
import { eventually, freePort, ROOT, startTestGateway, stopChild, type TestGateway } from './harness.js';

let made = 0;

/**
 * A fresh database on the run's cluster, named after `name` and unique in the run (files run in
 * parallel and may pick the same name). Returns its URL (trust auth: no password).
 */
export function freshDatabase(name: string): Promise<string> {
  return createDatabase(inject('postgresAdminUrl'), `${name}_${process.pid}_${++made}`);
}

/**
 * `count` gateways on one database, started at once (one migrates, the others wait for its lock),
 * each with a legacy (v1) and a modern (v2) client: instance i's clients are `clients[2i]` and
 * `clients[2i + 1]`. Fills the arrays the caller owns, so that its afterAll can close what started.
 */
export async function startInstances(
  raw: Parameters<typeof startTestGateway>[0],
  env: Record<string, string>,
  count: number,
  into: { gateways: TestGateway[]; clients: AnyHandle[] },
): Promise<void> {
  into.gateways.push(
    ...(await Promise.all(Array.from({ length: count }, () => startTestGateway(raw, { env })))),
  );
  for (const gw of into.gateways) into.clients.push(await connectLegacy(gw.url), await connectModern(gw.url));
}

/** Closes the clients, then the gateways, of `startInstances`. */
export async function stopInstances(from: { gateways: TestGateway[]; clients: AnyHandle[] }): Promise<void> {
  for (const c of from.clients) await c.close().catch(() => {});
  for (const gw of from.gateways) await gw.stop();
}

/** A gateway in a process of its own (`manifold serve` from dist/), so that a test can kill it. */
export interface SpawnedInstance {
  port: number;
  /** Its /mcp. */
  url: string;
  child: ChildProcess;
  /** Its JSON log lines so far. */
  logs: Record<string, unknown>[];
  /** SIGTERM, then SIGKILL after 5 s. */
  stop(): Promise<void>;
}

/**
 * `count` `manifold serve` processes of one config file on free loopback ports, each resolved once
 * its /healthz answers 200 (an upstream is ready). Fills `into`, so that the caller's afterAll can
 * stop what started.
 */
export async function spawnInstances(
  configFile: string,
  env: Record<string, string>,
  count: number,
  into: SpawnedInstance[],
): Promise<void> {
  const cli = join(ROOT, 'dist/manifold.js');
  if (!existsSync(cli)) throw new Error('dist is missing: run npm run build (npm test does)');
  const started = await Promise.all(
    Array.from({ length: count }, async () => {
      const port = await freePort();
      const child = spawn(
        process.execPath,
        [
          cli,
          'serve',
          '--config',
          configFile,
          '--host',
          '127.0.0.1',
          '--port',
          String(port),
          '--log-format',
          'json',
        ],
        { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const logs: Record<string, unknown>[] = [];
      let rest = '';
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        const lines = (rest + chunk).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) {
          try {
            logs.push(JSON.parse(line) as Record<string, unknown>);
          } catch {
            logs.push({ text: line });
          }
        }
      });
      child.stderr!.resume();
      const instance: SpawnedInstance = {
        port,
        url: `http://127.0.0.1:${port}/mcp`,
        child,
        logs,
        stop: () => stopChild(child),
      };
      into.push(instance);
      return instance;
    }),
  );
  await Promise.all(
    started.map((i) =>
      eventually(
        async () => {
          if (i.child.exitCode !== null) throw new Error(`manifold serve exited (${i.child.exitCode})`);
          const status = await fetch(`http://127.0.0.1:${i.port}/healthz`).then(
            (r) => r.status,
            () => 0,
          );
          return status === 200;
        },
        `manifold serve on ${i.port} to be healthy`,
        60_000,
        100,
      ),
    ),
  );
}
