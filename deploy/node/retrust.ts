import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { baselineFrom, diffTool, formatDiff } from '../../src/guards/drift.js';
import { describeDriftName } from '../../src/guards/drift-kinds.js';
import type { Logger } from '../../src/log.js';
import { identityOf, sameIdentity } from '../../src/store/state.js';
import { Upstream } from '../../src/upstream/upstream.js';
import { type CliIO, loadOrReport } from './cli-run.js';
import { nodePlatform } from './platform.js';
import { openSqliteStore } from './sqlite-store.js';

/**
 * `manifold retrust SERVER [--tool NAME]`: lists the server now, shows what changed since it was
 * trusted, and rewrites the baseline from that listing. The only way a baseline is rewritten.
 * A running gateway on the same store notices within seconds (trust epoch) and re-verifies.
 */
export async function runRetrust(argv: string[], io: CliIO, log: Logger, version: string): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { config: { type: 'string', short: 'c', default: 'manifold.json' }, tool: { type: 'string' } },
  });
  const name = positionals[0];
  if (!name) {
    io.err('usage: manifold retrust SERVER [--tool NAME] [--config manifold.json]\n');
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
  if (!config.gateway.store) {
    io.err('gateway.store is false: baselines live in memory only, so there is nothing to re-trust\n');
    return 2;
  }
  const store = openSqliteStore(resolve(config.gateway.store.path));
  // The CLI lists without a drift gate: it is the operator looking at what the server says now.
  const upstream = new Upstream(
    { ...server, disabled: false },
    { platform: nodePlatform(log, config.gateway), gateway: config.gateway, log, clientVersion: version },
  );
  try {
    await upstream.start();
    if (upstream.state !== 'ready') {
      io.err(`could not list ${name}: ${upstream.lastError ?? upstream.state}\n`);
      return 1;
    }
    // Tools, prompts and resource templates: everything drift covers (guards/drift-kinds.ts).
    const current = upstream.driftRecords();
    const identity = identityOf(server, secrets);
    const row = store.get(name);
    const old = row?.baseline ?? {};
    if (row && !sameIdentity(row.identity, identity)) {
      io.out(
        `identity of ${name} changed:\n- ${row.identity.transport} ${row.identity.target}\n+ ${identity.transport} ${identity.target}\n`,
      );
    }
    let next = await baselineFrom(current);
    if (values.tool !== undefined) {
      const tool = values.tool;
      if (!current.some((t) => t.name === tool) && !(tool in old)) {
        io.err(
          `server ${name} neither lists nor trusted ${describeDriftName(tool)} (prompts are named prompt:NAME, resource templates template:URI)\n`,
        );
        return 2;
      }
      // Only this tool changes; every other trusted tool keeps its old baseline.
      const merged = { ...old };
      if (tool in next) merged[tool] = next[tool]!;
      else delete merged[tool];
      next = merged;
    }
    const shown = values.tool === undefined ? undefined : values.tool;
    let changes = 0;
    for (const t of current) {
      if (shown !== undefined && t.name !== shown) continue;
      const before = old[t.name]?.tool as Tool | undefined;
      if (!before) {
        io.out(`+ new ${describeDriftName(t.name)}\n`);
        changes++;
        continue;
      }
      if (
        old[t.name]?.fingerprint !== next[t.name]?.fingerprint ||
        JSON.stringify(old[t.name]?.hints) !== JSON.stringify(next[t.name]?.hints)
      ) {
        io.out(`${formatDiff(diffTool(before, t))}\n`);
        changes++;
      }
    }
    for (const gone of Object.keys(old)) {
      if ((shown === undefined || gone === shown) && !current.some((t) => t.name === gone)) {
        io.out(`- removed ${describeDriftName(gone)}\n`);
        changes++;
      }
    }
    store.retrust(identity, next, Date.now());
    io.out(
      `re-trusted ${name}${shown ? ` (tool ${shown})` : ''}: ${changes} change(s); a running gateway picks this up within seconds\n`,
    );
    return 0;
  } finally {
    await upstream.close();
    store.close();
  }
}
