/**
 * A registry entry as an `mcpServers` entry (#54, SECURITY J3): an npm package as
 * `npx -y pkg@version`, a PyPI package as `uvx pkg==version`, or a remote as its URL and headers.
 * Nothing runs that the registry did not list for that version: the version is pinned exactly,
 * the package must come from the public registry it names, and runtime arguments (which could
 * make npx or uvx run something else) are refused. Secrets are never written: each becomes a
 * `${VAR}` the gateway reads from its environment.
 */
import { REGISTRY_SERVER_DEFAULTS } from '../config/sandbox.js';
import type { Argument, KeyValueInput, Package, ServerDetail, Transport } from './server-json.js';

/** One value the entry needs that the registry gives no value or default for. */
export interface NeededInput {
  /** What `--env NAME=value` names it by: the variable, header or argument name. */
  name: string;
  description?: string;
  secret: boolean;
  /** For a secret: the environment variable it is read from (`${var}` in the config). */
  envVar?: string;
}

/** What the user gave: a value, or (for a secret) `undefined`, meaning "read it from ${NAME}". */
export type GivenInputs = ReadonlyMap<string, string | undefined>;

export type Planned =
  | {
      ok: true;
      entry: Record<string, unknown>;
      /** What will run or be reached: `npx -y pkg@1.2.3`, `uvx pkg==1.2.3`, or the URL. */
      runs: string;
      needed: NeededInput[];
      /** Secrets written as `${VAR}`: the gateway's environment must set them. */
      envVars: string[];
    }
  | { ok: false; problem: string; fix: string };

/**
 * The defaults every server added from a registry gets, the one place `manifold add` adds them. It
 * starts untrusted: its first listing is held for review (`trust: "review"`). A package it runs
 * here (npx, uvx) also gets a sandbox with network off and starts on the first request that needs
 * it (REGISTRY_SERVER_DEFAULTS); a remote has no process to contain.
 */
export function registryServerDefaults(entry: Record<string, unknown>): Record<string, unknown> {
  if (entry.command === undefined) return { trust: 'review' };
  const { sandbox, start } = REGISTRY_SERVER_DEFAULTS;
  return { sandbox: { ...sandbox }, start, trust: 'review' };
}

const NPM_NAME = /^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;
const PYPI_NAME = /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/;
/** One exact version: no range, no tag, nothing a shell or npx could read as more. */
const EXACT_VERSION = /^[0-9A-Za-z][0-9A-Za-z.+_-]*$/;
const RANGE = /[\^~<>=*| ]|^latest$|\.x(\.|$)/i;
const PUBLIC_REGISTRY: Record<string, string> = {
  npm: 'https://registry.npmjs.org',
  pypi: 'https://pypi.org',
};

/** An environment variable name for an input: `X-API-Key` becomes `X_API_KEY`. */
export function envVarName(name: string): string {
  const v = name.replace(/[^A-Za-z0-9_]/g, '_').toUpperCase();
  return /^[0-9]/.test(v) ? `_${v}` : v;
}

/** The config key a registry name suggests: `io.github.acme/weather-mcp` gives `weather-mcp`. */
export function serverKey(registryName: string): string {
  const last = registryName.slice(registryName.lastIndexOf('/') + 1);
  const key = last
    .replace(/[^A-Za-z0-9_-]/g, '-')
    .replace(/_{2,}/g, '_')
    .replace(/-{2,}/g, '-')
    .replace(/^[-_]+|[-_]+$/g, '')
    .slice(0, 32)
    .replace(/[-_]+$/, '');
  return key === '' || key.toLowerCase() === 'manifold' ? 'server' : key;
}

/** The fields of a registry input this file reads. */
interface InputLike {
  value?: string | undefined;
  default?: string | undefined;
  isRequired?: boolean | undefined;
  isSecret?: boolean | undefined;
  description?: string | undefined;
}

class Inputs {
  needed: NeededInput[] = [];
  envVars: string[] = [];
  problem?: { problem: string; fix: string };
  constructor(private readonly given: GivenInputs) {}

  /** A secret, as the `${VAR}` it is read from; counted as needed until the user names it. */
  private secret(name: string, description: string | undefined): string | undefined {
    const envVar = envVarName(name);
    if (this.given.has(name)) {
      if (this.given.get(name) !== undefined) {
        this.problem ??= {
          problem: `${name} is a secret, and Manifold never writes a secret into the config file`,
          fix: `pass --env ${name} (without a value) and set ${envVar} in the gateway's environment; the entry reads it as \${${envVar}}`,
        };
        return undefined;
      }
      if (!this.envVars.includes(envVar)) this.envVars.push(envVar);
      return `\${${envVar}}`;
    }
    this.needed.push({ name, ...(description ? { description } : {}), secret: true, envVar });
    return undefined;
  }

  /** `{var}` in a value, from the given inputs, the variable's value or its default. */
  private substitute(value: string, variables: Record<string, InputLike> | undefined): string | undefined {
    let missing = false;
    const out = value.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => {
      const v = variables?.[name];
      if (!v) return whole; // Not a variable of this input: left as written (the format says so).
      const got = this.resolve(name, v);
      if (got === undefined) {
        missing = true;
        return whole;
      }
      return got;
    });
    return missing ? undefined : out;
  }

  /** One input's value, or undefined (recorded as needed when it is required). */
  resolve(
    name: string,
    input: InputLike & { variables?: Record<string, InputLike> | undefined },
  ): string | undefined {
    if (input.value !== undefined) return this.substitute(input.value, input.variables);
    if (input.isSecret) {
      if (!input.isRequired && !this.given.has(name)) return undefined;
      return this.secret(name, input.description);
    }
    const given = this.given.get(name);
    if (given !== undefined) return given;
    if (input.default !== undefined) return input.default;
    if (input.isRequired)
      this.needed.push({
        name,
        ...(input.description ? { description: input.description } : {}),
        secret: false,
      });
    return undefined;
  }

  keyValues(list: readonly KeyValueInput[] | undefined): Record<string, string> {
    const out: Record<string, string> = {};
    for (const kv of list ?? []) {
      const v = this.resolve(kv.name, kv);
      if (v !== undefined) out[kv.name] = v;
    }
    return out;
  }

  args(list: readonly Argument[] | undefined): string[] {
    const out: string[] = [];
    for (const a of list ?? []) {
      if (a.type === 'named') {
        if (!a.name) continue;
        const hasValue =
          a.value !== undefined ||
          a.default !== undefined ||
          a.isRequired ||
          a.isSecret ||
          this.given.has(a.name);
        if (!hasValue) continue;
        const v = this.resolve(a.name, a);
        if (v !== undefined) out.push(a.name, v);
      } else {
        const v = this.resolve(a.valueHint ?? 'argument', a);
        if (v !== undefined) out.push(v);
      }
    }
    return out;
  }
}

function pinned(p: Package): { ok: true; version: string } | { ok: false; problem: string; fix: string } {
  const public_ = PUBLIC_REGISTRY[p.registryType];
  if (
    p.registryBaseUrl !== undefined &&
    public_ !== undefined &&
    p.registryBaseUrl.replace(/\/+$/, '') !== public_
  ) {
    return {
      ok: false,
      problem: `its ${p.registryType} package is served by ${p.registryBaseUrl.slice(0, 100)}, not ${public_}, and npx or uvx would fetch it from elsewhere`,
      fix: 'add it by hand with a command that names that registry, after reviewing it',
    };
  }
  const v = p.version;
  if (v === undefined || !EXACT_VERSION.test(v) || RANGE.test(v)) {
    return {
      ok: false,
      problem: `its ${p.registryType} package ${p.identifier.slice(0, 100)} lists ${v === undefined ? 'no version' : `the version ${JSON.stringify(v.slice(0, 40))}`}, not one exact version`,
      fix: 'pick a version of the server whose package pins an exact version (--version)',
    };
  }
  if ((p.runtimeArguments?.length ?? 0) > 0) {
    return {
      ok: false,
      problem: `its ${p.registryType} package has runtime arguments, which could make ${p.registryType === 'npm' ? 'npx' : 'uvx'} run something other than the package listed`,
      fix: 'add it by hand after reviewing the arguments',
    };
  }
  return { ok: true, version: v };
}

function fromPackage(p: Package, given: GivenInputs): Planned | undefined {
  if (p.registryType !== 'npm' && p.registryType !== 'pypi') return undefined;
  if (p.transport && p.transport.type !== 'stdio') return undefined;
  const name = p.registryType === 'npm' ? NPM_NAME : PYPI_NAME;
  if (!name.test(p.identifier)) {
    return {
      ok: false,
      problem: `its ${p.registryType} package name ${JSON.stringify(p.identifier.slice(0, 100))} is not a valid package name`,
      fix: 'check the entry with its publisher',
    };
  }
  const pin = pinned(p);
  if (!pin.ok) return pin;
  const inputs = new Inputs(given);
  const spec =
    p.registryType === 'npm' ? `${p.identifier}@${pin.version}` : `${p.identifier}==${pin.version}`;
  const args = inputs.args(p.packageArguments);
  const env = inputs.keyValues(p.environmentVariables);
  if (inputs.problem) return { ok: false, ...inputs.problem };
  const command = p.registryType === 'npm' ? 'npx' : 'uvx';
  const entry: Record<string, unknown> = {
    command,
    args: p.registryType === 'npm' ? ['-y', spec, ...args] : [spec, ...args],
  };
  if (Object.keys(env).length > 0) entry.env = env;
  return {
    ok: true,
    entry,
    runs: `${command} ${p.registryType === 'npm' ? '-y ' : ''}${spec}`,
    needed: inputs.needed,
    envVars: inputs.envVars,
  };
}

function fromRemote(r: Transport, given: GivenInputs): Planned | undefined {
  if ((r.type !== 'streamable-http' && r.type !== 'sse') || !r.url) return undefined;
  const inputs = new Inputs(given);
  const url = inputs.resolve('url', { value: r.url, isRequired: true, variables: r.variables });
  const headers = inputs.keyValues(r.headers);
  if (inputs.problem) return { ok: false, ...inputs.problem };
  const entry: Record<string, unknown> = { type: r.type, url: url ?? r.url };
  if (Object.keys(headers).length > 0) entry.headers = headers;
  return { ok: true, entry, runs: url ?? r.url, needed: inputs.needed, envVars: inputs.envVars };
}

/**
 * The `mcpServers` entry for `detail`: its first npm or PyPI package (stdio), or with
 * `prefer: 'remote'` (or when it has no such package) its first streamable-HTTP or SSE remote.
 * `needed` lists the inputs still to give; the entry is complete only when it is empty.
 */
export function planEntry(detail: ServerDetail, given: GivenInputs, prefer?: 'package' | 'remote'): Planned {
  const fromPackages = () => {
    for (const p of detail.packages ?? []) {
      const planned = fromPackage(p, given);
      if (planned) return planned;
    }
    return undefined;
  };
  const fromRemotes = () => {
    for (const r of detail.remotes ?? []) {
      const planned = fromRemote(r, given);
      if (planned) return planned;
    }
    return undefined;
  };
  const planned = prefer === 'remote' ? (fromRemotes() ?? fromPackages()) : (fromPackages() ?? fromRemotes());
  if (planned?.ok) planned.entry = { ...planned.entry, ...registryServerDefaults(planned.entry) };
  if (planned) return planned;
  const kinds = [
    ...(detail.packages ?? []).map((p) => `${p.registryType} package`),
    ...(detail.remotes ?? []).map((r) => `${r.type} remote`),
  ];
  return {
    ok: false,
    problem: `${detail.name} ${detail.version} offers ${kinds.length > 0 ? kinds.join(', ') : 'no package or remote'}; Manifold adds npm and PyPI packages that speak stdio, and streamable-http or sse remotes`,
    fix: 'add it by hand to mcpServers (docs/configuration.md)',
  };
}
