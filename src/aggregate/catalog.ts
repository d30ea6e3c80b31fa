import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import { DESCRIBE_TOOL_NAME, discloseServer } from '../guards/disclosure.js';
import { quarantinedTool } from '../guards/drift/verdict.js';
import { toolFilter } from '../guards/filters.js';
import { type ApprovalDecision, approvalDecider, type RiskClass, riskClassifier } from '../guards/risk.js';
import { toolBounds } from '../guards/tool-bounds.js';
import { describeToolDefinition } from './describe-tool.js';
import {
  assignNames,
  candidateName,
  type NameCollision,
  type NameRequest,
  squattedNamespace,
} from './names.js';
import { type ArgPlan, overrideTool } from './overrides.js';

/**
 * One tool as the gateway exposes it. `tool` is what tools/list shows (possibly a disclosure
 * stub); `full` is the bounded, complete definition that describe_tool returns and that argument
 * validation uses; `original` is the name the upstream knows.
 */
export interface CatalogEntry {
  name: string;
  server: string;
  original: string;
  tool: Tool;
  full: Tool;
  deferred: boolean;
  /** Changed after it was trusted: listed as a stub, and every call is refused (drift). */
  quarantined?: boolean;
  /** Set for the gateway's own meta-tools, which no upstream serves. */
  meta?: 'describe_tool' | 'search_tools' | 'call_tool' | 'run_code';
  /** Its risk class (guards/risk.ts): declared, from trusted annotations, or `undeclared`. */
  risk: RiskClass;
  /** Whether a call runs, needs a person's yes first, or is refused by policy. */
  approval: ApprovalDecision;
  /** Set when an override reshaped its arguments: how a call's arguments map back (overrides.ts). */
  args?: ArgPlan;
}

export interface Diagnostic {
  rule: string;
  server: string;
  tool?: string;
  message: string;
}

export interface CatalogInput {
  server: ServerConfig;
  /** Trusted tools, as listed. */
  tools: readonly Tool[];
  /** Tools quarantined by drift: only their names are used. */
  quarantined?: readonly Tool[];
  /** Trusted tools the upstream no longer lists (upstream names). */
  removed?: readonly string[];
}

export interface CatalogOptions {
  maxDescriptionBytes: number;
  maxSchemaBytes: number;
  /** Every configured server's prefix: namespaces an unprefixed server may not publish into. */
  reserved?: ReadonlySet<string>;
}

/**
 * An immutable merged view over every ready upstream. A request reads one snapshot from start
 * to end, so a listing that changes mid-request can never mix two catalogs.
 */
export interface Catalog {
  version: number;
  entries: readonly CatalogEntry[];
  byName: ReadonlyMap<string, CatalogEntry>;
  collisions: readonly NameCollision[];
  diagnostics: readonly Diagnostic[];
  /** Exposed names of tools an upstream stopped publishing, with their server. */
  removed: ReadonlyMap<string, string>;
  /** Equal signatures mean clients would see exactly the same list. */
  signature: string;
  /** A short digest of `signature`: the same on every instance that built the same catalog. */
  digest: string;
}

export const emptyCatalog: Catalog = {
  version: 0,
  entries: [],
  byName: new Map(),
  collisions: [],
  diagnostics: [],
  removed: new Map(),
  signature: '[]',
  digest: digestOf('[]'),
};

const defaultOptions: CatalogOptions = { maxDescriptionBytes: 4096, maxSchemaBytes: 20_480 };

/**
 * Merges upstream listings in config order, each server's tools sorted by their upstream name,
 * so the merged order is deterministic whatever order the upstreams answer in. Per server:
 * config filters, then bounds on upstream text, then names, then the disclosure budget.
 */
export function buildCatalog(
  inputs: readonly CatalogInput[],
  version: number,
  options: CatalogOptions = defaultOptions,
): Catalog {
  const bound = toolBounds(options);
  const diagnostics: Diagnostic[] = [];
  const requests: NameRequest[] = [];
  const pending: {
    server: ServerConfig;
    tool: Tool;
    quarantined: boolean;
    original: string;
    plan?: ArgPlan | undefined;
  }[] = [];
  const removed = new Map<string, string>();
  const reserved =
    options.reserved ?? new Set(inputs.flatMap((i) => (i.server.prefix ? [i.server.prefix] : [])));
  for (const { server, tools: listed, quarantined = [], removed: gone = [] } of inputs) {
    const filtered = toolFilter(server.tools);
    const visible = (name: string) => filtered(name) && !squattedNamespace(server.prefix, name, reserved);
    for (const tool of listed) {
      const squat = filtered(tool.name) ? squattedNamespace(server.prefix, tool.name, reserved) : undefined;
      if (squat === undefined) continue;
      diagnostics.push({
        rule: 'reserved-namespace',
        server: server.name,
        tool: tool.name.slice(0, 128),
        message: `tool withheld: ${squat}__ names belong to ${squat === 'manifold' ? 'the gateway' : `server ${squat}`}`,
      });
    }
    const all = [
      ...listed.map((tool) => ({ tool, quarantined: false })),
      ...quarantined.map((tool) => ({ tool, quarantined: true })),
    ]
      .filter((t) => visible(t.tool.name))
      .sort((a, b) => compare(a.tool.name, b.tool.name));
    const overrides = server.overrides;
    if (overrides) unmatchedOverrides(server, overrides, all, diagnostics);
    for (const item of all) {
      const original = item.tool.name;
      const override = overrides && Object.hasOwn(overrides, original) ? overrides[original] : undefined;
      if (item.quarantined) {
        // The drifted text is never bounded, disclosed or shown: only the name is kept (the
        // overridden one, so a quarantined tool keeps the name its clients know).
        const name = override?.name ?? original;
        requests.push({ server: server.name, prefix: server.prefix, tool: name });
        pending.push({ server, tool: { ...item.tool, name }, quarantined: true, original });
        continue;
      }
      const { tool: bounded, findings } = bound(item.tool);
      for (const f of findings) {
        diagnostics.push({ rule: f.rule, server: server.name, tool: f.tool, message: findingMessage(f) });
      }
      if (!bounded) continue;
      // Overrides apply to the verified, bounded upstream text, before names are assigned (#54).
      let tool = bounded;
      let plan: ArgPlan | undefined;
      if (override) {
        const shaped = overrideTool(bounded, override);
        tool = shaped.tool;
        plan = shaped.plan;
        for (const note of shaped.notes) {
          diagnostics.push({
            rule: 'override-not-applied',
            server: server.name,
            tool: original,
            message: `tool ${original}: ${note}`,
          });
        }
      }
      requests.push({ server: server.name, prefix: server.prefix, tool: tool.name });
      pending.push({ server, tool, quarantined: false, original, plan });
    }
    for (const name of gone) {
      if (!visible(name)) continue;
      const shown =
        server.overrides && Object.hasOwn(server.overrides, name) ? server.overrides[name]?.name : undefined;
      removed.set(candidateName(server.prefix, shown ?? name).name, server.name);
    }
  }
  const { names, collisions } = assignNames(requests);
  for (const c of collisions) {
    diagnostics.push({
      rule: 'name-collision',
      server: c.dropped.server,
      tool: c.dropped.tool,
      message: `${c.name} is already published by server ${c.kept.server}; give server ${c.dropped.server} a prefix`,
    });
  }

  // Group by server (pending is already in server order) to apply each server's budget.
  const entries: CatalogEntry[] = [];
  let group:
    | {
        server: ServerConfig;
        items: {
          name: string;
          tool: Tool;
          full: Tool;
          quarantined: boolean;
          original: string;
          plan?: ArgPlan | undefined;
        }[];
      }
    | undefined;
  const flush = () => {
    if (!group || group.items.length === 0) return;
    const { server, items } = group;
    const open = items.filter((i) => !i.quarantined);
    const disclosed = discloseServer(
      open.map((i) => ({ name: i.name, tool: i.tool })),
      server.budgetTokens,
    );
    if (disclosed.floorExceeded) {
      diagnostics.push({
        rule: 'disclosure-budget-exceeded',
        server: server.name,
        message: `${open.length} tools need ${disclosed.floorTokens} tokens for names and descriptions alone, over the budget of ${server.budgetTokens}; narrow them with the server's tools.allow / tools.deny filter`,
      });
    }
    const deferred = new Set(disclosed.deferred);
    const shown = new Map(open.map((item, i) => [item.name, disclosed.tools[i] ?? item.tool]));
    const classify = riskClassifier(server);
    const decide = approvalDecider(server.approval);
    for (const item of items) {
      if (item.quarantined) {
        // The drifted text is never shown, even through describe_tool: our stub stands in.
        const stub = quarantinedTool(item.name, server.name);
        entries.push({
          name: item.name,
          server: server.name,
          original: item.original,
          tool: stub,
          full: stub,
          deferred: false,
          quarantined: true,
          risk: 'undeclared',
          approval: 'deny',
        });
        continue;
      }
      // Risk globs and approval rules are written over the upstream's own names.
      const risk = classify({ ...item.full, name: item.original });
      const approval = decide(item.original, risk);
      entries.push({
        name: item.name,
        server: server.name,
        original: item.original,
        tool: withPolicyMeta(shown.get(item.name) ?? item.tool, risk, approval),
        full: { ...item.full, name: item.name },
        deferred: deferred.has(item.name),
        risk,
        approval,
        ...(item.plan ? { args: item.plan } : {}),
      });
    }
  };
  names.forEach((name, i) => {
    const src = pending[i]!;
    if (!group || group.server !== src.server) {
      flush();
      group = { server: src.server, items: [] };
    }
    if (name === null) return;
    group.items.push({
      name,
      tool: { ...src.tool, name },
      full: src.tool,
      quarantined: src.quarantined,
      original: src.original,
      plan: src.plan,
    });
  });
  flush();

  if (entries.some((e) => e.deferred)) {
    const def = describeToolDefinition();
    entries.push({
      name: DESCRIBE_TOOL_NAME,
      server: 'manifold',
      original: DESCRIBE_TOOL_NAME,
      tool: def,
      full: def,
      deferred: false,
      meta: 'describe_tool',
      risk: 'read',
      approval: 'allow',
    });
  }
  const byName = new Map<string, CatalogEntry>();
  for (const e of entries) byName.set(e.name, e);
  const signature = JSON.stringify(entries.map((e) => e.tool));
  for (const name of byName.keys()) removed.delete(name);
  return {
    version,
    entries,
    byName,
    collisions,
    diagnostics,
    removed,
    signature,
    digest: digestOf(signature),
  };
}

/**
 * A catalog cut down to the tools whose exposed names `keep` accepts (a profile's tool globs). The
 * describe_tool meta-tool stays only while some kept tool's schema is shortened.
 */
export function narrowCatalog(catalog: Catalog, keep: (name: string) => boolean): Catalog {
  let entries = catalog.entries.filter((e) => e.meta || keep(e.name));
  if (!entries.some((e) => e.deferred)) entries = entries.filter((e) => e.meta !== 'describe_tool');
  const byName = new Map<string, CatalogEntry>();
  for (const e of entries) byName.set(e.name, e);
  const removed = new Map([...catalog.removed].filter(([name]) => keep(name)));
  const signature = JSON.stringify(entries.map((e) => e.tool));
  return { ...catalog, entries, byName, removed, signature, digest: digestOf(signature) };
}

/** The `_meta` keys under which tools/list tells a client a tool's class and approval rule. */
export const RISK_META_KEY = 'manifold/risk';
export const APPROVAL_META_KEY = 'manifold/approval';

/**
 * The listed tool with the gateway's policy facts in `_meta` beside the upstream's own keys
 * (the gateway's keys win: an upstream cannot claim a class for itself).
 */
function withPolicyMeta(tool: Tool, risk: RiskClass, approval: ApprovalDecision): Tool {
  const meta: Record<string, unknown> = {
    ...(tool._meta && typeof tool._meta === 'object' ? tool._meta : {}),
  };
  meta[RISK_META_KEY] = risk;
  if (approval === 'allow') delete meta[APPROVAL_META_KEY];
  else meta[APPROVAL_META_KEY] = approval;
  return { ...tool, _meta: meta };
}

/**
 * Two independent 32-bit FNV-1a hashes over the UTF-16 code units, as 16 hex digits: enough to
 * tell catalogs apart (it is never a security boundary: cursors are MACed separately).
 */
export function digestOf(text: string): string {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995) ^ (b >>> 13);
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}

function findingMessage(f: { rule: string; tool: string } & Record<string, unknown>): string {
  switch (f.rule) {
    case 'schema-too-large':
      return `tool ${f.tool} withheld: its ${String(f.which)} is ${String(f.bytes)} bytes, over maxSchemaBytes`;
    case 'description-clipped':
      return `tool ${f.tool}: description of ${String(f.bytes)} bytes clipped to maxDescriptionBytes`;
    case 'invalid-x-mcp-header':
      return `tool ${f.tool} withheld: ${String(f.reason)}`;
    case 'unsafe-text-stripped':
      return `tool ${f.tool}: control, bidirectional or zero-width characters stripped from ${String(f.field)}`;
    default:
      return `tool ${f.tool}: ${f.rule}`;
  }
}

/** An override naming a tool the server does not list: a warning once it has listed (#54). */
function unmatchedOverrides(
  server: ServerConfig,
  overrides: Readonly<Record<string, unknown>>,
  listed: readonly { tool: Tool }[],
  diagnostics: Diagnostic[],
): void {
  const names = new Set(listed.map((t) => t.tool.name));
  for (const name of Object.keys(overrides)) {
    if (names.has(name)) continue;
    diagnostics.push({
      rule: 'override-unmatched',
      server: server.name,
      tool: name.slice(0, 128),
      message: `mcpServers.${server.name}.overrides names tool ${name.slice(0, 128)}, which the server does not list (or its filters hide); check the upstream's tool name, or remove the override`,
    });
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
