/**
 * `manifold search-registry` and `manifold add` (#54): find a server in an MCP Registry, and write
 * it into the config file as an `mcpServers` entry, keeping the file's formatting (jsonc-parser's
 * edits, with the file's own indentation and line ends). A server added this way starts untrusted
 * (`trust: "review"`): its first listing waits for `manifold retrust`.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import {
  applyEdits,
  type Edit,
  type FormattingOptions,
  modify,
  type ParseError,
  parse as parseJsonc,
} from 'jsonc-parser';
import { DEFAULT_REGISTRY_URL } from '../../../src/config/defaults.js';
import { formatIssues, parseGatewayText } from '../../../src/config/load.js';
import type { GatewayConfig } from '../../../src/config/types.js';
import type { Logger } from '../../../src/lib/log.js';
import { RegistryError, registryClient } from '../../../src/registry/client.js';
import { OFFICIAL_META } from '../../../src/registry/server-json.js';
import { type NeededInput, planEntry, serverKey } from '../../../src/registry/to-entry.js';
import { nodePlatform } from '../runtime/platform.js';
import { type CliIO, CommandError, parseFlags, runCommand, UsageError } from './run.js';

const SEARCH_USAGE = 'usage: manifold search-registry WORDS... [--registry URL] [--config manifold.json]';
const ADD_USAGE =
  'usage: manifold add NAME [--version V] [--env K=V]... [--as KEY] [--remote] [--registry URL] [--config manifold.json]';

/**
 * The gateway settings the registry is read with (its URL, the egress rules): the config's
 * `gateway` section, or the defaults while there is no file yet (a first `manifold add`).
 */
function gatewaySettings(path: string, io: CliIO): GatewayConfig | undefined {
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '{}';
  const read = parseGatewayText(text, process.env, path);
  if (read.ok) return read.gateway;
  io.err(`invalid config ${path}:\n${formatIssues(read.errors, path)}\n`);
  return undefined;
}

async function registryFor(
  values: { config: string; registry?: string | undefined },
  io: CliIO,
  log: Logger,
) {
  const gateway = gatewaySettings(values.config, io);
  if (!gateway) return undefined;
  const url = values.registry ?? gateway.registry?.url ?? DEFAULT_REGISTRY_URL;
  if (!/^https?:\/\//.test(url))
    throw new UsageError(`--registry must be an http(s) URL, got ${url.slice(0, 100)}`);
  // The registry is reached like any upstream: through the egress-guarded fetch (D1-D7).
  return { client: registryClient(nodePlatform(log, gateway).fetch, url), url };
}

/** `manifold search-registry WORDS...`: the latest version of each server whose name matches. */
export function runSearchRegistry(argv: string[], io: CliIO, log: Logger): Promise<number> {
  return runCommand('search-registry', SEARCH_USAGE, io, async () => {
    const { values, positionals } = parseFlags({
      args: argv,
      allowPositionals: true,
      options: {
        config: { type: 'string', short: 'c', default: 'manifold.json' },
        registry: { type: 'string' },
      },
    });
    if (positionals.length === 0) throw new UsageError('name some words to search for');
    const reg = await registryFor(values, io, log);
    if (!reg) return 2;
    const { hits, skipped } = await reg.client.search(positionals.join(' ')).catch(registryFailure);
    if (hits.length === 0)
      io.out(`no server in ${reg.url} matches ${JSON.stringify(positionals.join(' '))}\n`);
    for (const h of hits) io.out(`${h.name}  ${h.version}  ${oneLine(h.description)}\n`);
    if (skipped > 0) io.err(`${skipped} malformed entr${skipped === 1 ? 'y was' : 'ies were'} skipped\n`);
    if (hits.length > 0) io.out(`\nadd one with: manifold add ${hits[0]!.name}\n`);
    return 0;
  });
}

/** `manifold add NAME`: resolve, pin, ask for what is missing, and write the entry. */
export function runAdd(argv: string[], io: CliIO, log: Logger): Promise<number> {
  return runCommand('add', ADD_USAGE, io, async () => {
    const { values, positionals } = parseFlags({
      args: argv,
      allowPositionals: true,
      options: {
        config: { type: 'string', short: 'c', default: 'manifold.json' },
        registry: { type: 'string' },
        version: { type: 'string' },
        env: { type: 'string', multiple: true, default: [] },
        as: { type: 'string' },
        remote: { type: 'boolean' },
      },
    });
    const name = positionals[0];
    if (!name || positionals.length > 1)
      throw new UsageError('name exactly one server, e.g. io.github.acme/weather');
    const given = new Map<string, string | undefined>();
    for (const kv of values.env) {
      const eq = kv.indexOf('=');
      if (eq === 0) throw new UsageError(`--env ${kv.slice(0, 40)}: the name is missing`);
      if (eq < 0) given.set(kv, undefined);
      else given.set(kv.slice(0, eq), kv.slice(eq + 1));
    }
    const reg = await registryFor(values, io, log);
    if (!reg) return 2;
    const found = await reg.client.get(name, values.version).catch(registryFailure);
    const detail = found.server;
    const status = (found._meta?.[OFFICIAL_META] as { status?: unknown } | undefined)?.status;
    if (status === 'deleted') throw new CommandError(`${name} ${detail.version} is deleted in the registry`);
    if (status === 'deprecated') io.err(`note: ${name} ${detail.version} is deprecated in the registry\n`);

    let plan = planEntry(detail, given, values.remote ? 'remote' : undefined);
    if (plan.ok && plan.needed.length > 0 && io.ask) {
      // On a terminal: ask for each missing input, then plan again with the answers.
      await askFor(plan.needed, given, io);
      plan = planEntry(detail, given, values.remote ? 'remote' : undefined);
    }
    if (!plan.ok) throw new CommandError(`${plan.problem}; ${plan.fix}`);
    if (plan.needed.length > 0) {
      const lines = plan.needed.map(
        (n) =>
          `  ${n.name}${n.secret ? ` (secret: pass --env ${n.name}, and set ${n.envVar} in the gateway's environment)` : ` (pass --env ${n.name}=VALUE)`}${n.description ? `: ${oneLine(n.description)}` : ''}`,
      );
      throw new CommandError(
        `${name} ${detail.version} needs inputs that were not given:\n${lines.join('\n')}`,
      );
    }
    const key = values.as ?? serverKey(detail.name);
    const written = writeEntry(values.config, key, plan.entry);
    io.out(`added ${key} to ${values.config}: ${name} ${detail.version}, which runs ${plan.runs}\n`);
    for (const v of plan.envVars)
      io.out(`set ${v} in the gateway's environment: the entry reads it as \${${v}}\n`);
    io.out(
      `${key} starts untrusted: its tools are held until you review them with \`manifold drift ${key}\` and accept them with \`manifold retrust ${key}\`\n`,
    );
    return written;
  });
}

async function askFor(needed: readonly NeededInput[], given: Map<string, string | undefined>, io: CliIO) {
  for (const n of needed) {
    const about = n.description ? ` (${oneLine(n.description)})` : '';
    if (n.secret) {
      const answer = await io.ask!(
        `${n.name}${about} is a secret: it is never written into the config, but read from \${${n.envVar}} in the gateway's environment. Use that? [Y/n] `,
      );
      if (/^\s*n(o)?\s*$/i.test(answer ?? '')) throw new CommandError(`not added: ${n.name} is needed`);
      given.set(n.name, undefined);
    } else {
      const answer = (await io.ask!(`${n.name}${about}: `))?.trim();
      if (!answer) throw new CommandError(`not added: ${n.name} is needed`);
      given.set(n.name, answer);
    }
  }
}

function registryFailure(e: unknown): never {
  if (e instanceof RegistryError) throw new CommandError(e.message);
  throw e;
}

/**
 * Writes `entry` under `mcpServers.<key>` (or `servers`, where the file keeps them there) with
 * jsonc-parser's minimal edit: every other byte of the file stays as it was.
 */
function writeEntry(path: string, key: string, entry: Record<string, unknown>): number {
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '{\n  "mcpServers": {}\n}\n';
  const errors: ParseError[] = [];
  const doc = parseJsonc(text, errors, { allowTrailingComma: false, disallowComments: false }) as unknown;
  if (errors.length > 0 || typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new CommandError(`${path} is not a JSON object; fix it first (manifold check --config ${path})`);
  }
  const root = doc as Record<string, unknown>;
  const section = root.mcpServers === undefined && root.servers !== undefined ? 'servers' : 'mcpServers';
  const servers = root[section];
  if (servers !== undefined && (typeof servers !== 'object' || servers === null || Array.isArray(servers))) {
    throw new CommandError(`${section} in ${path} is not an object; fix it first`);
  }
  if (servers && Object.hasOwn(servers, key)) {
    throw new CommandError(`${path} already has a server named ${key}; choose another name with --as NAME`);
  }
  writeFileSync(path, applyEdits(text, insertion(text, section, key, entry, servers !== undefined)));
  return 0;
}

/**
 * The one edit that adds `key`: jsonc-parser finds where it goes; the text is indented here, in
 * the file's own style, because its formatter also re-flows the line the edit starts on (the
 * previous entry's closing line), and nothing but the new entry may change.
 */
function insertion(
  text: string,
  section: string,
  key: string,
  entry: unknown,
  sectionExists: boolean,
): Edit[] {
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const indented = /\n([ \t]+)\S/.exec(text)?.[1];
  const unit = indented?.startsWith('\t') ? '\t' : ' '.repeat(indented?.length ?? 2);
  if (!sectionExists) {
    // No server map yet: the whole section is new, so the formatter may lay it out.
    const formatting: FormattingOptions =
      unit === '\t'
        ? { insertSpaces: false, tabSize: 1, eol }
        : { insertSpaces: true, tabSize: unit.length, eol };
    return modify(text, [section, key], entry, { formattingOptions: formatting });
  }
  const [edit, ...more] = modify(text, [section, key], entry, {});
  if (!edit || more.length > 0)
    throw new CommandError(`could not find where to add ${key} in the config file`);
  const at = unit.repeat(2);
  const body = `${JSON.stringify(key)}: ${JSON.stringify(entry, null, unit)
    .split('\n')
    .join(eol + at)}`;
  const content = edit.content.startsWith(',') ? `,${eol}${at}${body}` : `${eol}${at}${body}${eol}${unit}`;
  return [{ ...edit, content }];
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 200);
}
