/**
 * Drift for prompts and resource templates, on the tools' machinery. A prompt's text and
 * arguments, and a template's description, are shown to a model just like a tool's, so a silent
 * change to them after trust is drift too (issue: the whole MCP surface). Each is wrapped into a
 * tool-shaped record whose `inputSchema` holds the original whole, so the one fingerprint covers
 * every field of it, and unwrapped again after the verdict.
 *
 * Wrapped names carry a kind prefix in the same baseline. An upstream that publishes a tool
 * literally named `prompt:x` next to a prompt `x` makes the name ambiguous, which the drift
 * decision already treats as "listed twice": neither is trusted (fail closed).
 */
import type { Prompt, ResourceTemplate, Tool } from '@modelcontextprotocol/sdk/types.js';

export const PROMPT_KEY = 'prompt:';
export const TEMPLATE_KEY = 'template:';
const PROMPT_FIELD = 'x-manifold-prompt';
const TEMPLATE_FIELD = 'x-manifold-template';

export function promptAsTool(prompt: Prompt): Tool {
  return { name: `${PROMPT_KEY}${prompt.name}`, inputSchema: { type: 'object', [PROMPT_FIELD]: prompt } };
}

export function templateAsTool(template: ResourceTemplate): Tool {
  return {
    name: `${TEMPLATE_KEY}${template.uriTemplate}`,
    inputSchema: { type: 'object', [TEMPLATE_FIELD]: template },
  };
}

/** What a drift listing holds, split back into its kinds. */
export interface DriftItems {
  tools: Tool[];
  prompts: Prompt[];
  templates: ResourceTemplate[];
}

/** Everything one listing offers that drift covers, as tool-shaped records. */
export function driftListing(items: DriftItems): Tool[] {
  return [...items.tools, ...items.prompts.map(promptAsTool), ...items.templates.map(templateAsTool)];
}

/** Splits tool-shaped records back into tools, prompts and templates. */
export function splitDriftListing(records: readonly Tool[]): DriftItems {
  const out: DriftItems = { tools: [], prompts: [], templates: [] };
  for (const r of records) {
    const wrapped = (r.inputSchema as Record<string, unknown> | undefined) ?? {};
    if (r.name.startsWith(PROMPT_KEY) && typeof wrapped[PROMPT_FIELD] === 'object') {
      out.prompts.push(wrapped[PROMPT_FIELD] as Prompt);
    } else if (r.name.startsWith(TEMPLATE_KEY) && typeof wrapped[TEMPLATE_FIELD] === 'object') {
      out.templates.push(wrapped[TEMPLATE_FIELD] as ResourceTemplate);
    } else {
      out.tools.push(r);
    }
  }
  return out;
}

/** Splits baseline-style names (removed lists) by kind, without their prefixes. */
export function splitNames(names: readonly string[]): {
  tools: string[];
  prompts: string[];
  templates: string[];
} {
  const out = { tools: [] as string[], prompts: [] as string[], templates: [] as string[] };
  for (const n of names) {
    if (n.startsWith(PROMPT_KEY)) out.prompts.push(n.slice(PROMPT_KEY.length));
    else if (n.startsWith(TEMPLATE_KEY)) out.templates.push(n.slice(TEMPLATE_KEY.length));
    else out.tools.push(n);
  }
  return out;
}

/** How a wrapped name reads in a re-trust diff or a log line. */
export function describeDriftName(name: string): string {
  if (name.startsWith(PROMPT_KEY)) return `prompt ${name.slice(PROMPT_KEY.length)}`;
  if (name.startsWith(TEMPLATE_KEY)) return `resource template ${name.slice(TEMPLATE_KEY.length)}`;
  return `tool ${name}`;
}
