/**
 * The values a rule sees (#51), built from what the gateway already holds: the catalog entry, the
 * principal, and the request as the Exchange describes it. The era reaches a rule only as data.
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

export const toolInput = (t: ToolFacts) => ({
  name: t.name,
  server: t.server,
  upstreamName: t.original,
  risk: t.risk,
  annotations: isRecord(t.tool.annotations) ? t.tool.annotations : {},
});

export const principalInput = (p: CallerFacts) => ({
  subject: p.subject,
  tenant: p.tenant,
  scopes: p.scopes ?? [],
  claims: p.claims ?? {},
});

export const requestInput = (method: string, era: string | undefined, profile: string | undefined) => ({
  method,
  // A view is cut for every era at once: its rules never read `request.era` (rules.ts).
  era: era ?? '',
  profile: profile ?? '',
});

/** The input of a view rule for one tool: no args, no era. */
export function toolViewInput(t: ToolFacts, p: CallerFacts, profile: string | undefined): RuleInput {
  return {
    tool: toolInput(t),
    principal: principalInput(p),
    request: requestInput('tools/call', undefined, profile),
  };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The input of a rule for a prompt (`args` only per request). */
export function promptInput(
  prompt: { name: string; server: string; original: string },
  p: CallerFacts,
  profile: string | undefined,
  request?: { era: string; args: Record<string, unknown> },
): RuleInput {
  return {
    prompt: { name: prompt.name, server: prompt.server, upstreamName: prompt.original },
    principal: principalInput(p),
    request: requestInput('prompts/get', request?.era, profile),
    ...(request ? { args: request.args } : {}),
  };
}

/** The input of a rule for a resource, by the URI the client names. */
export function resourceInput(
  resource: { uri: string; server: string },
  p: CallerFacts,
  profile: string | undefined,
  era?: string,
): RuleInput {
  return {
    resource: { uri: resource.uri, server: resource.server },
    principal: principalInput(p),
    request: requestInput('resources/read', era, profile),
    args: {},
  };
}
