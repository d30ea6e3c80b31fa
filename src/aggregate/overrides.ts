/**
 * A tool (or prompt) as the operator reshaped it (#54): applied to the verified upstream
 * definition when the catalog is built, after drift (which stays on the upstream's own text) and
 * before names are assigned (an overridden name is checked like any other). What the client sees
 * is the overridden tool; what the upstream receives is mapped back by the tool's `ArgPlan`.
 */
import type { Prompt, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { PromptOverride, ToolOverride } from '../config/types.js';
import { isObject } from '../lib/json.js';

/**
 * How a client's arguments become the upstream's: names the client may not send (fixed, hidden,
 * and the upstream names of renamed ones), names mapped back, defaults filled in, values set.
 */
export interface ArgPlan {
  /** Arguments a client never sends: sending one is a validation error. */
  locked: readonly string[];
  /** Exposed name -> upstream name. */
  renamed: ReadonlyMap<string, string>;
  /** Upstream name -> value, filled in when the client left it out. */
  defaults: ReadonlyMap<string, unknown>;
  /** Upstream name -> value, set on every call whatever the client sent. */
  set: ReadonlyMap<string, unknown>;
}

export interface Overridden {
  tool: Tool;
  plan?: ArgPlan;
  /** Parts of the override that did not apply (an argument the schema lacks); the rest did. */
  notes: string[];
}

/** The upstream tool as the override shows it; `tool.name` is the override's name, unprefixed. */
export function overrideTool(tool: Tool, o: ToolOverride): Overridden {
  const notes: string[] = [];
  const out: Tool = { ...tool };
  if (o.name !== undefined) out.name = o.name;
  if (o.title !== undefined) out.title = o.title;
  if (o.description !== undefined) out.description = o.description;
  if (o.annotations !== undefined) out.annotations = { ...(tool.annotations ?? {}), ...o.annotations };
  const params = Object.keys(o.args);
  if (params.length === 0) return { tool: out, notes };

  const schema = tool.inputSchema;
  const properties: Record<string, unknown> = isObject(schema.properties) ? { ...schema.properties } : {};
  let required = Array.isArray(schema.required) ? [...schema.required] : [];
  const locked: string[] = [];
  const renamed = new Map<string, string>();
  const defaults = new Map<string, unknown>();
  const set = new Map<string, unknown>();
  const prop = (name: string): Record<string, unknown> | undefined => {
    const p = properties[name];
    return isObject(p) ? (p as Record<string, unknown>) : undefined;
  };
  for (const param of params) {
    const a = o.args[param]!;
    const p = prop(param);
    if (a.kind === 'fixed' || a.kind === 'hidden') {
      // Set even when the schema does not declare it: the operator means it to be sent.
      delete properties[param];
      required = required.filter((r) => r !== param);
      locked.push(param);
      if (a.kind === 'fixed') set.set(param, a.value);
      else if (a.value !== undefined) set.set(param, a.value);
      continue;
    }
    if (!p) {
      notes.push(
        `argument "${param}" is not in the tool's input schema; its ${a.kind} override is not applied`,
      );
      continue;
    }
    if (a.kind === 'default') {
      properties[param] = {
        ...p,
        default: a.value,
        ...(a.description ? { description: a.description } : {}),
      };
      // The gateway fills it in, so the client need not.
      required = required.filter((r) => r !== param);
      defaults.set(param, a.value);
    } else if (a.kind === 'rename') {
      delete properties[param];
      properties[a.to] = a.description ? { ...p, description: a.description } : p;
      required = required.map((r) => (r === param ? a.to : r));
      renamed.set(a.to, param);
      locked.push(param);
    } else {
      properties[param] = { ...p, description: a.description };
    }
  }
  const inputSchema: Tool['inputSchema'] = { ...schema, properties: properties as Record<string, object> };
  if (required.length > 0) inputSchema.required = required;
  else delete inputSchema.required;
  out.inputSchema = inputSchema;
  // A renamed argument's new name may be one the fixed or hidden ones freed: it is the client's now.
  const plan: ArgPlan = { locked: locked.filter((l) => !renamed.has(l)), renamed, defaults, set };
  return { tool: out, plan, notes };
}

/** The arguments the upstream receives for a client's (already validated) arguments. */
export function upstreamArguments(plan: ArgPlan, args: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(args)) out[plan.renamed.get(key) ?? key] = args[key];
  for (const [key, value] of plan.defaults) if (out[key] === undefined) out[key] = value;
  for (const [key, value] of plan.set) out[key] = value;
  return out;
}

/** The arguments a client sent that only the gateway may set; empty when none. */
export function lockedArguments(plan: ArgPlan, args: Record<string, unknown>): string[] {
  return plan.locked.filter((name) => Object.hasOwn(args, name));
}

/** The prompt as the override shows it; `prompt.name` is the override's name, unprefixed. */
export function overridePrompt(prompt: Prompt, o: PromptOverride): Prompt {
  return {
    ...prompt,
    ...(o.name !== undefined ? { name: o.name } : {}),
    ...(o.title !== undefined ? { title: o.title } : {}),
    ...(o.description !== undefined ? { description: o.description } : {}),
  };
}
