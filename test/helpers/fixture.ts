import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { eventually, stopChild, type TestGateway } from './harness.js';

/** One line a scripted fixture printed on stdout. */
export interface FixtureEvent {
  event: string;
  [k: string]: unknown;
}

export interface Fixture {
  child: ChildProcess;
  port: number;
  url: string;
  events: FixtureEvent[];
  stop(): Promise<void>;
}

/** Starts a fixture that prints JSON lines on stdout, the first `{"event":"listening","port":N}`. */
export async function startFixture(script: string, env: Record<string, string> = {}): Promise<Fixture> {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const events: FixtureEvent[] = [];
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => {
    try {
      events.push(JSON.parse(line) as FixtureEvent);
    } catch {
      // not ours
    }
  });
  await eventually(() => events.some((e) => e.event === 'listening'), `${script} listening`);
  const port = Number(events.find((e) => e.event === 'listening')!.port);
  return { child, port, url: `http://127.0.0.1:${port}/mcp`, events, stop: () => stopChild(child) };
}

export interface UpstreamHealth {
  name: string;
  state: string;
  tools: number;
  rule?: string;
  lastError?: string;
}

/** Each upstream's entry in the gateway's /healthz, by name. */
export async function health(gw: TestGateway): Promise<Record<string, UpstreamHealth>> {
  const h = (await (await fetch(gw.url.replace('/mcp', '/healthz'))).json()) as {
    upstreams: UpstreamHealth[];
  };
  return Object.fromEntries(h.upstreams.map((u) => [u.name, u]));
}
