/**
 * Local servers, contained and on demand (#53): a stdio server's `sandbox` (and the gateway's
 * default one), `start` and `idleStopSeconds`, and `gateway.maxRunningServers`. Read key by key,
 * so that every finding names its own path and fix; the Node host builds the sandbox from the
 * result (deploy/node/runtime/sandbox.ts).
 */

import { isObject, type JsonObject } from '../lib/json.js';
import type { SandboxLimits, SandboxSpec } from '../platform.js';
import { error, type Findings, interpolateField } from './findings.js';
import { checkAllowedHost } from './hosts.js';
import { describeKind } from './issues.js';
import { keysOf } from './json-parse.js';
import { formatPath, type PathSegment } from './paths.js';
import { unknownKeyWarning } from './unknown-keys.js';

/** What the sandboxed child may reach and spend: the seam's own shape (platform.ts). */
export type SandboxConfig = SandboxSpec;

export const SANDBOX_LIMIT_DEFAULTS: Readonly<SandboxLimits> = Object.freeze({
  memoryMb: 2048,
  cpuSeconds: 0,
  processes: 256,
  openFiles: 1024,
});

/** `sandbox: {}`: network off, no extra paths, a private data directory, the default limits. */
export function defaultSandbox(): SandboxConfig {
  return { network: false, allowHosts: [], filesystem: { read: [] }, limits: { ...SANDBOX_LIMIT_DEFAULTS } };
}

/** How long a `lazy` server runs with nothing in flight before it stops, when its config does not say. */
export const LAZY_IDLE_STOP_SECONDS = 600;

/**
 * What `manifold add` writes into a new server entry (the registry issue), as config JSON: a sandbox
 * with network off and no extra paths, started on the first request that needs it. Existing configs
 * keep their own defaults (no sandbox, started with the gateway).
 */
export const REGISTRY_SERVER_DEFAULTS: Readonly<{ sandbox: { network: false }; start: 'lazy' }> =
  Object.freeze({ sandbox: Object.freeze({ network: false as const }), start: 'lazy' as const });

export const SANDBOX_KEYS = ['network', 'allowHosts', 'filesystem', 'limits'] as const;
export const FILESYSTEM_KEYS = ['read', 'write'] as const;
export const LIMIT_KEYS = Object.keys(SANDBOX_LIMIT_DEFAULTS) as (keyof SandboxLimits)[];
const LIMIT_UNITS: Record<keyof SandboxLimits, { min: number; example: number; unit: string }> = {
  memoryMb: { min: 256, example: 2048, unit: 'MiB of address space, at least 256' },
  cpuSeconds: { min: 0, example: 3600, unit: 'seconds of CPU time, 0 for no limit' },
  processes: { min: 1, example: 256, unit: 'processes and threads' },
  openFiles: { min: 16, example: 1024, unit: 'open files, at least 16' },
};

const SANDBOX_SHAPE_FIX =
  'write sandbox as false, or as an object such as {"network": false, "filesystem": {"read": ["./data"]}}';

/** A list of paths: strings without NUL; `write` must not expose the whole file system. */
function readPaths(f: Findings, raw: unknown, path: PathSegment[], writable: boolean): string[] | undefined {
  const value = interpolateField(f, raw, path);
  if (!Array.isArray(value)) {
    error(
      f,
      path,
      `expected an array of paths, got ${describeKind(value)}`,
      `write ${String(path.at(-1))} as an array such as ["./data", "/srv/shared"]`,
    );
    return undefined;
  }
  const out: string[] = [];
  let ok = true;
  value.forEach((p, i) => {
    if (typeof p !== 'string' || p.trim() === '' || p.includes('\0')) {
      ok = false;
      error(
        f,
        [...path, i],
        typeof p === 'string'
          ? 'must be a non-empty path without NUL'
          : `expected a path, got ${describeKind(p)}`,
        'write an absolute path, or one relative to the directory the gateway starts in',
      );
      return;
    }
    if (writable && /^\/+$/.test(p.trim())) {
      ok = false;
      error(
        f,
        [...path, i],
        'makes the whole file system writable, which leaves nothing contained',
        'list only the directories the server must write, or remove write to give it a private data directory',
      );
      return;
    }
    out.push(p);
  });
  return ok ? out : undefined;
}

/**
 * Reads a `sandbox` value: `false`, or an object whose keys override `inherited` (the gateway's
 * default sandbox, or the built-in one). `true` is read as `{}`.
 */
export function readSandbox(
  f: Findings,
  raw: unknown,
  base: PathSegment[],
  inherited: SandboxConfig | false = false,
): SandboxConfig | false | undefined {
  if (raw === false) return false;
  if (raw === true) raw = {};
  if (!isObject(raw)) {
    error(f, base, `expected false or an object, got ${describeKind(raw)}`, SANDBOX_SHAPE_FIX);
    return undefined;
  }
  const start = inherited === false ? defaultSandbox() : inherited;
  const out: SandboxConfig = {
    network: start.network,
    allowHosts: [...start.allowHosts],
    filesystem: {
      read: [...start.filesystem.read],
      ...(start.filesystem.write ? { write: [...start.filesystem.write] } : {}),
    },
    limits: { ...start.limits },
  };
  const before = f.errors.length;
  for (const key of keysOf(raw)) {
    if (!(SANDBOX_KEYS as readonly string[]).includes(key)) {
      f.warnings.push(unknownKeyWarning([...base, key], SANDBOX_KEYS));
    }
  }
  if (raw.network !== undefined) {
    const network = interpolateField(f, raw.network, [...base, 'network']);
    if (network === false || network === 'egress') out.network = network;
    else
      error(
        f,
        [...base, 'network'],
        `expected false or "egress", got ${describeKind(network)}`,
        'write false for no network at all, or "egress" with allowHosts for only the hosts the server needs',
      );
  }
  if (raw.allowHosts !== undefined) {
    const hosts = interpolateField(f, raw.allowHosts, [...base, 'allowHosts']);
    if (!Array.isArray(hosts)) {
      error(
        f,
        [...base, 'allowHosts'],
        `expected an array of host names, got ${describeKind(hosts)}`,
        'write allowHosts as ["api.github.com"]',
      );
    } else {
      out.allowHosts = [];
      hosts.forEach((h, i) => {
        if (typeof h !== 'string') {
          error(
            f,
            [...base, 'allowHosts', i],
            `expected a host name, got ${describeKind(h)}`,
            'write a host name such as "api.github.com"',
          );
          return;
        }
        const host = checkAllowedHost(f, h, [...base, 'allowHosts', i]);
        if (host !== undefined) out.allowHosts.push(host);
      });
    }
  }
  if (raw.filesystem !== undefined) {
    const fsBase = [...base, 'filesystem'];
    if (!isObject(raw.filesystem)) {
      error(
        f,
        fsBase,
        `expected an object, got ${describeKind(raw.filesystem)}`,
        'write filesystem as {"read": ["./docs"], "write": ["./out"]}',
      );
    } else {
      const fsRaw = raw.filesystem as JsonObject;
      for (const key of keysOf(fsRaw)) {
        if (!(FILESYSTEM_KEYS as readonly string[]).includes(key))
          f.warnings.push(unknownKeyWarning([...fsBase, key], FILESYSTEM_KEYS));
      }
      if (fsRaw.read !== undefined) {
        const read = readPaths(f, fsRaw.read, [...fsBase, 'read'], false);
        if (read) out.filesystem.read = read;
      }
      if (fsRaw.write !== undefined) {
        const write = readPaths(f, fsRaw.write, [...fsBase, 'write'], true);
        if (write) out.filesystem.write = write;
      }
    }
  }
  if (raw.limits !== undefined) {
    const limBase = [...base, 'limits'];
    if (!isObject(raw.limits)) {
      error(
        f,
        limBase,
        `expected an object, got ${describeKind(raw.limits)}`,
        'write limits as {"memoryMb": 2048, "cpuSeconds": 3600, "processes": 256, "openFiles": 1024}',
      );
    } else {
      const limRaw = raw.limits as JsonObject;
      for (const key of keysOf(limRaw)) {
        if (!(LIMIT_KEYS as string[]).includes(key)) {
          f.warnings.push(unknownKeyWarning([...limBase, key], LIMIT_KEYS));
          continue;
        }
        const k = key as keyof SandboxLimits;
        const value = interpolateField(f, limRaw[k], [...limBase, k]);
        const { min, example, unit } = LIMIT_UNITS[k];
        if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
          error(
            f,
            [...limBase, k],
            `expected an integer (${unit}), got ${typeof value === 'number' ? value : describeKind(value)}`,
            `write a whole number without quotes, e.g. ${example}`,
          );
        } else out.limits[k] = value;
      }
    }
  }
  if (out.network === 'egress' && out.allowHosts.length === 0 && f.errors.length === before) {
    error(
      f,
      [...base, 'allowHosts'],
      'is empty, but network is "egress": the server could reach nothing',
      'list the hosts it needs, e.g. ["api.github.com"], or set network to false',
    );
  }
  if (out.network === false && out.allowHosts.length > 0) {
    f.warnings.push({
      path: formatPath([...base, 'allowHosts']),
      message: 'is ignored: network is false, so the server reaches no host',
      fix: 'set network to "egress" to let it reach these hosts, or remove allowHosts',
    });
  }
  return f.errors.length > before ? undefined : out;
}

/** A server's `start`: `eager` (with the gateway, the default) or `lazy` (on the first request that needs it). */
export type StartMode = 'eager' | 'lazy';
