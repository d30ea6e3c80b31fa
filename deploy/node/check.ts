import type { Config } from '../../src/config/types.js';
import { Gateway } from '../../src/gateway.js';
import type { Logger } from '../../src/log.js';
import { nodePlatform } from './platform.js';

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
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
): Promise<number> {
  const gateway = new Gateway({ config, platform: nodePlatform(log, config.gateway), version });
  try {
    await gateway.start();
    await gateway.settled();
    const rows = gateway.health().upstreams;
    const w = Math.max(6, ...rows.map((r) => r.name.length)) + 2;
    out(
      `${pad('SERVER', w)}${pad('TRANSPORT', 17)}${pad('STATUS', 13)}${pad('TOOLS', 7)}${pad('PROTOCOL', 19)}ERROR`,
    );
    for (const r of rows) {
      // The era each server was found to speak, and the revision in use.
      const protocol = r.era ? `${r.era} ${r.protocolVersion ?? ''}` : '-';
      out(
        `${pad(r.name, w)}${pad(r.transport, 17)}${pad(r.state, 13)}${pad(String(r.tools), 7)}${pad(protocol, 19)}${r.lastError ?? ''}`,
      );
    }
    out('');
    out(`exposed tools (${gateway.catalog.entries.length}):`);
    for (const e of gateway.catalog.entries) out(`  ${e.name}`);
    return rows.every((r) => r.state === 'ready' || r.state === 'disabled') ? 0 : 1;
  } finally {
    await gateway.close(0);
  }
}
