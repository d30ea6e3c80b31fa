import type { CatalogEntry } from '../../src/aggregate/catalog.js';
import { parseConfigObject } from '../../src/config/load.js';
import { CallGuards } from '../../src/gateway/call-guards.js';
import { createJsonLogger } from '../../src/lib/log.js';

const MiB = 1 << 20;

/** The call guards of a one-server config whose result cap is `cap` bytes (upstream bodies up to 64 MiB). */
export function guardsWithCap(cap: number): CallGuards {
  const parsed = parseConfigObject(
    {
      mcpServers: { s: { command: 'node', maxResultBytes: cap } },
      gateway: { maxResultBytes: 65_536, maxUpstreamBodyBytes: 64 * MiB },
    },
    {},
  );
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return new CallGuards(parsed.config, createJsonLogger({ level: 'error', write: () => {} }));
}

/** That server's tool `s__tool`, with an output schema when one is given. */
export function toolEntry(outputSchema?: unknown): CatalogEntry {
  const full = {
    name: 's__tool',
    inputSchema: { type: 'object' },
    ...(outputSchema === undefined ? {} : { outputSchema }),
  };
  return { name: 's__tool', server: 's', original: 'tool', tool: full, full } as unknown as CatalogEntry;
}
