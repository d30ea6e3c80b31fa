import type { Config } from '../../../src/config/types.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import type { LogFields, Logger } from '../../../src/lib/log.js';
import { redactor } from '../../../src/lib/redact.js';
import { nodePlatform } from '../runtime/platform.js';
import { describeSandbox } from '../runtime/sandbox.js';
import { type OpenedStore, openConfiguredStore } from '../store/open.js';

/**
 * The real store, read and never written: `check` compares against the baselines a gateway
 * trusts, and records nothing (a server without a baseline is reported as such, not trusted).
 */
function readOnly(store: OpenedStore, firstContact: Set<string>): OpenedStore {
  return {
    get: (name) => store.get(name),
    saveCatalog: async () => true,
    createBaseline: async (identity) => {
      firstContact.add(identity.name);
      return true;
    },
    retrust: () => Promise.reject(new Error('manifold check never re-trusts')),
    trustEpoch: () => store.trustEpoch(),
    claim: async () => false,
    saveRun: async () => {},
    loadRun: async () => undefined,
    recordDrift: async () => {},
    driftHistory: (server, tool, limit) => store.driftHistory(server, tool, limit),
    close: () => store.close(),
    // A check connects the way `serve` would, so it reads the stored upstream credentials.
    credentials: store.credentials,
  };
}

/** Last stderr lines shown for a server that is not ready. */
const STDERR_LINES = 8;

interface ServerTrail {
  stderr: string[];
  exited?: { code: unknown; signal: unknown };
}

/** `log`, and what each server's stdio child said on stderr and how it exited, kept per server. */
function collecting(log: Logger, trails: Map<string, ServerTrail>, base: LogFields = {}): Logger {
  const trail = (): ServerTrail | undefined => {
    const server = base.server;
    if (typeof server !== 'string') return undefined;
    let t = trails.get(server);
    if (!t) {
      t = { stderr: [] };
      trails.set(server, t);
    }
    return t;
  };
  const tap =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (event: string, fields?: LogFields): void => {
      if (event === 'upstream.stderr' && typeof fields?.line === 'string') {
        const t = trail();
        if (t) {
          t.stderr.push(fields.line.slice(0, 300));
          if (t.stderr.length > STDERR_LINES) t.stderr.shift();
        }
      } else if (event === 'upstream.exited') {
        const t = trail();
        if (t) t.exited = { code: fields?.code, signal: fields?.signal };
      } else if (event === 'drift.baseline_recorded') {
        // The read-only store recorded nothing: say so below instead of logging it.
        return;
      } else if (event === 'upstream.spawned') {
        // A new attempt: what the last one said is kept only until the new one speaks.
        const t = trail();
        if (t) t.exited = undefined;
      }
      log[level](event, fields);
    };
  return {
    debug: tap('debug'),
    info: tap('info'),
    warn: tap('warn'),
    error: tap('error'),
    child: (fields) => collecting(log.child(fields), trails, { ...base, ...fields }),
  };
}

/**
 * `manifold check`: connect every server once, print a table and the exposed names.
 * Returns the exit code: 0 when every enabled server is ready, 1 otherwise.
 */
export async function runCheck(
  config: Config,
  log: Logger,
  version: string,
  out: (s: string) => void,
  secrets: readonly string[] = [],
): Promise<number> {
  const trails = new Map<string, ServerTrail>();
  const tapped = collecting(log, trails);
  const firstContact = new Set<string>();
  const opened = await openConfiguredStore(config.gateway.store, log);
  const store = opened ? readOnly(opened, firstContact) : undefined;
  const gateway = new Gateway({
    config,
    platform: nodePlatform(tapped, config.gateway),
    version,
    secrets,
    ...(store ? { store } : {}),
  });
  try {
    // Which lazy servers a gateway on this store would list from a stored catalog (#53), read
    // before this check lists any; then every lazy server is started, to see that it works.
    const lazy = gateway.pool.upstreams.filter((u) => u.config.start === 'lazy');
    const stored = new Set(
      (
        await Promise.all(lazy.map(async (u) => ((await gateway.drift.cachedTools(u.config)) ? u.name : '')))
      ).filter(Boolean),
    );
    await gateway.start();
    await gateway.settled();
    await Promise.allSettled(lazy.map((u) => u.wake()));
    const rows = gateway.health().upstreams;
    const w = Math.max(6, ...rows.map((r) => r.name.length)) + 2;
    out(
      `${'SERVER'.padEnd(w)}${'TRANSPORT'.padEnd(17)}${'STATUS'.padEnd(13)}${'TOOLS'.padEnd(7)}${'PROTOCOL'.padEnd(19)}${'SANDBOX'.padEnd(9)}ERROR`,
    );
    const configOf = (name: string) => gateway.pool.get(name)?.config;
    for (const r of rows) {
      // The era each server was found to speak, and the revision in use.
      const protocol = r.era ? `${r.era} ${r.protocolVersion ?? ''}` : '-';
      const sandbox = configOf(r.name)?.sandbox;
      const contained = !sandbox ? 'none' : sandbox.network === false ? 'no-net' : 'egress';
      out(
        `${r.name.padEnd(w)}${r.transport.padEnd(17)}${r.state.padEnd(13)}${String(r.tools).padEnd(7)}${protocol.padEnd(19)}${contained.padEnd(9)}${r.lastError ?? ''}`,
      );
    }
    // What each sandbox holds, and how each lazy server is listed (#53).
    for (const r of rows) {
      const config = configOf(r.name);
      if (config?.sandbox) out(`${r.name}: sandbox: ${describeSandbox(config.sandbox)}`);
      if (config?.start === 'lazy') {
        const idle = config.idleStopSeconds ? `stops after ${config.idleStopSeconds} s idle` : 'never stops';
        out(
          stored.has(r.name)
            ? `${r.name}: lazy (starts on the first request that needs it, ${idle}); listed from its stored catalog`
            : `${r.name}: lazy (${idle}); no stored catalog yet: a gateway on this store starts it once when it starts, lists and verifies it, stores the catalog and stops it`,
        );
      }
    }
    // A server that did not start says why on stderr far more often than over MCP.
    const redact = redactor(secrets);
    for (const r of rows) {
      const t = trails.get(r.name);
      if (r.state === 'ready' || r.state === 'disabled' || !t || t.stderr.length === 0) continue;
      const how = t.exited
        ? t.exited.signal
          ? ` (it was stopped by ${String(t.exited.signal)})`
          : ` (it exited with code ${String(t.exited.code)})`
        : '';
      out('');
      out(`${r.name}: the last lines it wrote to stderr${how}:`);
      for (const line of t.stderr) out(`  ${redact(line)}`);
    }
    // Drift held back: what a gateway on this store would quarantine or withhold right now.
    let drifted = 0;
    for (const r of rows) {
      if (!r.drift) continue;
      drifted++;
      out('');
      if (r.drift.identityChanged) {
        out(`${r.name}: its command, args or URL changed since it was trusted: every tool is withheld`);
      }
      if (r.drift.quarantined.length > 0)
        out(`${r.name}: quarantined (changed since trusted): ${r.drift.quarantined.join(', ')}`);
      if (r.drift.withheld.length > 0)
        out(`${r.name}: withheld (new, never trusted): ${r.drift.withheld.join(', ')}`);
      out(`  see the diff with \`manifold drift ${r.name}\`, accept it with \`manifold retrust ${r.name}\``);
    }
    const first = rows.filter((r) => firstContact.has(r.name)).map((r) => r.name);
    if (first.length > 0) {
      out('');
      out(`no baseline yet for ${first.join(', ')}: a gateway on this store trusts them on first contact`);
    }
    out('');
    out(`exposed tools (${gateway.catalog.entries.length}):`);
    for (const e of gateway.catalog.entries) out(`  ${e.name}`);
    const ready = rows.every((r) => r.state === 'ready' || r.state === 'disabled');
    return ready && drifted === 0 ? 0 : 1;
  } finally {
    // Closes the store too.
    await gateway.close(0);
  }
}
