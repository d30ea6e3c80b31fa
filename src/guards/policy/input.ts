/**
 * The values a rule sees (#51), built from what the gateway already holds: the catalog entry, the
 * principal, and the request as the Exchange describes it. The era reaches a rule only as data.
 *
 * They are handed to CEL as Maps: @bufbuild/cel reads a Map's entries directly, where a plain
 * object is first inspected as a possible protobuf message on every access, which costs several
 * times the rule itself. The view part (tool, caller, profile) is built once per view; a call
 * builds only its arguments and its request.
 */
import type { RuleInput } from './cel.js';

/** What a rule reads of a tool (an aggregate CatalogEntry is one). */
export interface ToolFacts {
  name: string;
  server: string;
  original: string;
  risk: string;
  tool: { annotations?: unknown };
}

/** What a rule reads of the caller (an auth Principal is one). */
export interface CallerFacts {
  subject: string;
  tenant: string;
  scopes?: readonly string[] | undefined;
  claims?: Readonly<Record<string, unknown>> | undefined;
}

/** Deepest JSON a rule is handed as Maps; the arguments are bounded at the edge anyway. */
const MAX_DEPTH = 64;

/** A JSON value as CEL reads it fastest: objects as Maps, arrays element by element. */
export function celValue(value: unknown, depth = 0): unknown {
  if (typeof value !== 'object' || value === null || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v) => celValue(v, depth + 1));
  const out = new Map<string, unknown>();
  for (const key of Object.keys(value))
    out.set(key, celValue((value as Record<string, unknown>)[key], depth + 1));
  return out;
}

export const toolInput = (t: ToolFacts) =>
  new Map<string, unknown>([
    ['name', t.name],
    ['server', t.server],
    ['upstreamName', t.original],
    ['risk', t.risk],
    ['annotations', celValue(isRecord(t.tool.annotations) ? t.tool.annotations : {})],
  ]);

export const principalInput = (p: CallerFacts) =>
  new Map<string, unknown>([
    ['subject', p.subject],
    ['tenant', p.tenant],
    ['scopes', [...(p.scopes ?? [])]],
    ['claims', celValue(p.claims ?? {})],
  ]);

export const requestInput = (method: string, era: string | undefined, profile: string | undefined) =>
  new Map<string, unknown>([
    ['method', method],
    // A view is cut for every era at once: its rules never read `request.era` (rules.ts).
    ['era', era ?? ''],
    ['profile', profile ?? ''],
  ]);

/** The caller's part of a view's input, built once per view: who asks, and for which method. */
export function callerViewInput(p: CallerFacts, profile: string | undefined, method: string): RuleInput {
  return { principal: principalInput(p), request: requestInput(method, undefined, profile) };
}

/** The input of a view rule for one tool: no args, no era. */
export function toolViewInput(t: ToolFacts, p: CallerFacts, profile: string | undefined): RuleInput {
  return { ...callerViewInput(p, profile, 'tools/call'), tool: toolInput(t) };
}

export const promptValue = (prompt: { name: string; server: string; original: string }) =>
  new Map<string, unknown>([
    ['name', prompt.name],
    ['server', prompt.server],
    ['upstreamName', prompt.original],
  ]);

export const resourceValue = (resource: { uri: string; server: string }) =>
  new Map<string, unknown>([
    ['uri', resource.uri],
    ['server', resource.server],
  ]);

/** The input of a view rule for a prompt. */
export function promptInput(
  prompt: { name: string; server: string; original: string },
  p: CallerFacts,
  profile: string | undefined,
): RuleInput {
  return { ...callerViewInput(p, profile, 'prompts/get'), prompt: promptValue(prompt) };
}

/** The input of a view rule for a resource, by the URI the client names. */
export function resourceInput(
  resource: { uri: string; server: string },
  p: CallerFacts,
  profile: string | undefined,
): RuleInput {
  return { ...callerViewInput(p, profile, 'resources/read'), resource: resourceValue(resource) };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
