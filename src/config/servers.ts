/**
 * Reads the server map (`mcpServers`, or `servers` as VS Code writes it), then the rules that span
 * entries: prefixes must not collide, and `gateway.disclosure.alwaysLoad` must name real servers.
 */

import { isObject, type JsonObject } from '../lib/json.js';
import { error, type Findings, isTainted } from './findings.js';
import type { GatewayRead } from './gateway.js';
import { describeKind } from './issues.js';
import { keysOf } from './json-parse.js';
import { type PrefixClaim, readServer } from './server-entry.js';
import type { ServerConfig } from './types.js';
import { closestKey } from './unknown-keys.js';

function checkPrefixes(f: Findings, claims: PrefixClaim[]): void {
  const first = new Map<string, PrefixClaim>();
  for (const claim of claims) {
    const key = claim.prefix.toLowerCase();
    const earlier = first.get(key);
    if (!earlier) {
      first.set(key, claim);
      continue;
    }
    const pair = `servers ${JSON.stringify(earlier.server)} and ${JSON.stringify(claim.server)}`;
    let message: string;
    if (earlier.tainted || claim.tainted) message = `${pair} have the same prefix`;
    else if (earlier.prefix === claim.prefix)
      message = `${pair} both use the prefix ${JSON.stringify(claim.prefix)}`;
    else {
      message = `${pair} use the prefixes ${JSON.stringify(earlier.prefix)} and ${JSON.stringify(claim.prefix)}, which differ only in case`;
    }
    error(
      f,
      claim.path,
      message,
      'give one of them a different "prefix"; the prefix defaults to the server name',
    );
  }
}

export function readServers(f: Findings, raw: JsonObject, gateway: GatewayRead): ServerConfig[] {
  const maps: string[] = [];
  if (raw.mcpServers !== undefined) maps.push('mcpServers');
  if (raw.servers !== undefined) maps.push('servers');
  const example =
    'add an entry under mcpServers, e.g. "mcpServers": {"everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]}}';
  if (maps.length === 0) {
    error(f, ['mcpServers'], 'no servers configured', example);
    return [];
  }
  if (maps.length === 2) {
    error(
      f,
      ['servers'],
      'both "mcpServers" and "servers" are present; use one of them',
      'move the entries from servers into mcpServers and delete servers',
    );
  }
  const servers: ServerConfig[] = [];
  for (const mapKey of maps) {
    const map = raw[mapKey];
    if (!isObject(map)) {
      error(
        f,
        [mapKey],
        `expected an object that maps server names to server entries, got ${describeKind(map)}`,
        `write ${mapKey} as {"name": {"command": "..."}}`,
      );
      continue;
    }
    const names = keysOf(map);
    if (names.length === 0) {
      error(f, [mapKey], 'no servers configured', example);
      continue;
    }
    const claims: PrefixClaim[] = [];
    for (const name of names) {
      const server = readServer(f, mapKey, name, map[name], gateway, claims);
      if (server) servers.push(server);
    }
    checkPrefixes(f, claims);
  }
  return servers;
}

/** Every `gateway.disclosure.alwaysLoad` entry must name a server in the file (disabled or not). */
export function checkAlwaysLoad(f: Findings, raw: JsonObject, gateway: GatewayRead): void {
  if (gateway.alwaysLoad.length === 0) return;
  const known: string[] = [];
  for (const mapKey of ['mcpServers', 'servers']) {
    const map = raw[mapKey];
    if (isObject(map)) known.push(...keysOf(map));
  }
  const listed = known.map((n) => JSON.stringify(n)).join(', ');
  gateway.alwaysLoad.forEach((name, i) => {
    if (known.includes(name)) return;
    const path = ['gateway', 'disclosure', 'alwaysLoad', i];
    const tainted = isTainted(f, path);
    const near = tainted ? undefined : closestKey(name, known);
    let fix: string;
    if (known.length === 0) fix = 'add the server under mcpServers, or remove it from alwaysLoad';
    else if (near !== undefined)
      fix = `did you mean ${JSON.stringify(near)}? The configured servers are ${listed}`;
    else fix = `use one of the configured server names: ${listed}; or remove the entry`;
    const what = tainted ? 'a server' : `server ${JSON.stringify(name)}`;
    error(f, path, `names ${what}, which is not configured`, fix);
  });
}
