import type { Config, ServerConfig } from '../../../src/config/types.js';
import { acceptedItems, identityLine, planRetrust } from '../../../src/guards/drift/retrust-plan.js';
import type { Baseline } from '../../../src/guards/drift/verdict.js';
import type { Logger } from '../../../src/lib/log.js';
import { identityOf, type ServerIdentity, sameIdentity } from '../../../src/store/state.js';
import { Upstream } from '../../../src/upstream/upstream.js';
import { nodePlatform } from '../runtime/platform.js';
import { type OpenedStore, openConfiguredStore } from '../store/open.js';
import { type CliIO, flagsOr, loadOrReport } from './run.js';

const RETRUST_USAGE = 'usage: manifold retrust SERVER [--tool NAME] [--yes] [--config manifold.json]';
const DRIFT_USAGE = 'usage: manifold drift [SERVER ...] [--config manifold.json]';

/** What a server lists now against what was trusted: the text to show, and the new baseline. */
interface DriftReport {
  lines: string[];
  changes: number;
  identity: ServerIdentity;
  identityChanged: boolean;
  next: Baseline;
  /** The baseline as trusted before. */
  old: Baseline;
}

/**
 * Lists `server` now (without a drift gate: this is the operator looking at what it says) and
 * compares it with its stored baseline. `tool` narrows the comparison and the new baseline to
 * one tool, prompt or template. Returns a string instead of a report when it cannot be done.
 */
async function compare(
  server: ServerConfig,
  config: Config,
  store: OpenedStore,
  secrets: readonly string[],
  log: Logger,
  version: string,
  tool?: string,
): Promise<DriftReport | { refused: string; code: number }> {
  const name = server.name;
  const upstream = new Upstream(
    { ...server, disabled: false },
    { platform: nodePlatform(log, config.gateway), gateway: config.gateway, log, clientVersion: version },
  );
  try {
    await upstream.start();
    if (upstream.state !== 'ready') {
      return { refused: `could not list ${name}: ${upstream.lastError ?? upstream.state}`, code: 1 };
    }
    // Tools, prompts and resource templates: everything drift covers (src/guards/drift/kinds.ts).
    const current = upstream.driftRecords();
    const identity = identityOf(server, secrets);
    const row = await store.get(name);
    const old = row?.baseline ?? {};
    const lines: string[] = [];
    const identityChanged = row !== undefined && !sameIdentity(row.identity, identity);
    if (identityChanged) lines.push(identityLine(name, row!.identity, identity));
    const plan = await planRetrust(old, current, tool);
    if ('refused' in plan) return { refused: `server ${name} ${plan.refused}`, code: 2 };
    lines.push(...plan.lines);
    const { changes, next } = plan;
    return { lines, changes, identity, identityChanged, next, old };
  } finally {
    await upstream.close();
  }
}

async function openStore(config: Config, io: CliIO, log: Logger): Promise<OpenedStore | undefined> {
  if (!config.gateway.store) {
    io.err('gateway.store is false: baselines live in memory only, so there is nothing to compare\n');
    return undefined;
  }
  return openConfiguredStore(config.gateway.store, log);
}

/**
 * `manifold retrust SERVER [--tool NAME] [--yes]`: lists the server now, shows what changed since
 * it was trusted, asks (on a terminal; `--yes` for scripts; neither is a refusal), and rewrites the
 * baseline from that listing. The only way a baseline is rewritten. A running gateway on the same
 * store notices within seconds (trust epoch) and re-verifies.
 */
export async function runRetrust(argv: string[], io: CliIO, log: Logger, version: string): Promise<number> {
  const flags = flagsOr('retrust', RETRUST_USAGE, io, {
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c', default: 'manifold.json' },
      tool: { type: 'string' },
      yes: { type: 'boolean', short: 'y' },
    },
  });
  if (!flags) return 2;
  const { values, positionals } = flags;
  const name = positionals[0];
  if (!name) {
    io.err(`${RETRUST_USAGE}\n`);
    return 2;
  }
  const loaded = loadOrReport(values.config, io);
  if (!loaded) return 2;
  const { config, secrets } = loaded;
  const server = config.servers.find((s) => s.name === name);
  if (!server) {
    io.err(
      `no server named ${name} in ${loaded.path}; configured: ${config.servers.map((s) => s.name).join(', ')}\n`,
    );
    return 2;
  }
  const store = await openStore(config, io, log);
  if (!store) return 2;
  try {
    const report = await compare(server, config, store, secrets, log, version, values.tool);
    if ('refused' in report) {
      io.err(`${report.refused}\n`);
      return report.code;
    }
    for (const line of report.lines) io.out(`${line}\n`);
    const what = `${name}${values.tool ? ` (tool ${values.tool})` : ''}`;
    if ((report.changes > 0 || report.identityChanged) && !values.yes) {
      if (!io.ask) {
        io.err(
          `not re-trusted: confirm on a terminal, or pass --yes to re-trust ${what} with the ${report.changes} change(s) above\n`,
        );
        return 2;
      }
      const answer = await io.ask(`re-trust ${what} with the ${report.changes} change(s) above? [y/N] `);
      if (!/^\s*y(es)?\s*$/i.test(answer ?? '')) {
        io.out(`not re-trusted: ${name} is unchanged\n`);
        return 1;
      }
    }
    const now = Date.now();
    await store.retrust(report.identity, report.next, now);
    // Drift history (#52): who accepted is the shell's operator, whom the gateway cannot name.
    for (const item of acceptedItems(report.old, report.next)) {
      await store.recordDrift({
        server: name,
        ...item,
        kind: 'accepted',
        by: 'manifold retrust (CLI)',
        at: now,
      });
    }
    io.out(
      `re-trusted ${what}: ${report.changes} change(s); a running gateway picks this up within seconds\n`,
    );
    return 0;
  } finally {
    await store.close();
  }
}

/**
 * `manifold drift [SERVER ...]`: for each server (every enabled one by default), what it lists now
 * against what was trusted, with diffs. Changes nothing. Exit 0 when nothing is pending, 1 when
 * anything is (or a server could not be listed), 2 for a bad invocation.
 */
export async function runDrift(argv: string[], io: CliIO, log: Logger, version: string): Promise<number> {
  const flags = flagsOr('drift', DRIFT_USAGE, io, {
    args: argv,
    allowPositionals: true,
    options: { config: { type: 'string', short: 'c', default: 'manifold.json' } },
  });
  if (!flags) return 2;
  const { values, positionals } = flags;
  const loaded = loadOrReport(values.config, io);
  if (!loaded) return 2;
  const { config, secrets } = loaded;
  const unknown = positionals.filter((p) => !config.servers.some((s) => s.name === p));
  if (unknown.length > 0) {
    io.err(
      `no server named ${unknown.join(', ')} in ${loaded.path}; configured: ${config.servers.map((s) => s.name).join(', ')}\n`,
    );
    return 2;
  }
  const servers = config.servers.filter((s) =>
    positionals.length > 0 ? positionals.includes(s.name) : !s.disabled,
  );
  const store = await openStore(config, io, log);
  if (!store) return 2;
  let pending = 0;
  try {
    const reports = await Promise.all(
      servers.map((s) => compare(s, config, store, secrets, log, version).then((r) => [s.name, r] as const)),
    );
    for (const [name, report] of reports) {
      if ('refused' in report) {
        io.out(`${name}: ${report.refused}\n`);
        pending++;
        continue;
      }
      const row = await store.get(name);
      if (!row?.baseline && config.servers.find((s) => s.name === name)?.trust === 'review') {
        // Held for review (#54): nothing is trusted until the operator accepts this listing.
        pending++;
        io.out(
          `${name}: held for review: ${report.changes} new item(s), none trusted yet; \`manifold retrust ${name}\` to accept\n`,
        );
        for (const line of report.lines) io.out(`${line}\n`);
        continue;
      }
      if (!row) {
        io.out(`${name}: no baseline yet (a gateway records it on first contact)\n`);
        continue;
      }
      if (report.changes === 0 && !report.identityChanged) {
        io.out(`${name}: no drift\n`);
        continue;
      }
      pending++;
      io.out(
        `${name}: ${report.changes} change(s) since it was trusted; \`manifold retrust ${name}\` to accept\n`,
      );
      for (const line of report.lines) io.out(`${line}\n`);
    }
    return pending > 0 ? 1 : 0;
  } finally {
    await store.close();
  }
}
