/**
 * The rest of the catalog: prompts, resources and resource templates, merged over the ready
 * upstreams with the same rules as tools. Config order, then each server's items sorted, so the
 * merged order does not depend on which upstream answered first; per server: config filters,
 * then bounds on upstream text, then names (prompts) or URIs (resources, templates).
 */

import type { Prompt, Resource, ResourceTemplate } from '@modelcontextprotocol/sdk/types.js';
import type { PromptOverride, ServerConfig } from '../config/types.js';
import { quarantineDescription } from '../guards/drift/verdict.js';
import { toolFilter } from '../guards/filters.js';
import { boundPrompt, boundResource, boundTemplate, isFinding } from '../guards/item-bounds.js';
import { normalizeUri, normalizeUriPattern } from '../guards/uri-normal.js';
import type { Diagnostic } from './catalog.js';
import { digestOf } from './catalog.js';
import { assignNames, type NameRequest, squattedNamespace } from './names.js';
import { overridePrompt } from './overrides.js';
import { rewriteUri, templateMatcher } from './uris.js';

export interface PromptEntry {
  /** The exposed name (qualified like a tool's). */
  name: string;
  server: string;
  original: string;
  prompt: Prompt;
  quarantined?: boolean;
}

export interface ResourceEntry {
  /**
   * The exposed URI: the upstream's own in normal form (guards/uri-normal.ts), or that rewritten
   * where another server published it first.
   */
  uri: string;
  server: string;
  /**
   * The URI exactly as the upstream listed it, which is what it is asked for: the server's own
   * name for the resource the filters checked in normal form (a server may key its resources by
   * the text it listed, `%7E` or an upper-case host included).
   */
  original: string;
  resource: Resource;
  /** What resource grants match: `<label>__<normalised original URI>`. */
  grantKey: string;
}

export interface TemplateEntry {
  uriTemplate: string;
  server: string;
  original: string;
  template: ResourceTemplate;
  grantKey: string;
  /** The server's label, when this template was rewritten (reads expanded from it are un-rewritten). */
  rewrittenFor?: string;
  matches: (uri: string) => boolean;
  quarantined?: boolean;
}

export interface SurfaceInput {
  server: ServerConfig;
  prompts: readonly Prompt[];
  quarantinedPrompts?: readonly Prompt[];
  resources: readonly Resource[];
  templates: readonly ResourceTemplate[];
  quarantinedTemplates?: readonly ResourceTemplate[];
}

export interface Surface {
  prompts: readonly PromptEntry[];
  promptByName: ReadonlyMap<string, PromptEntry>;
  resources: readonly ResourceEntry[];
  resourceByUri: ReadonlyMap<string, ResourceEntry>;
  templates: readonly TemplateEntry[];
  /** Label (prefix, or name when unprefixed) -> server, for URIs in a rewritten namespace. */
  labels: ReadonlyMap<string, string>;
  /**
   * Server -> its configured resources allow/deny, for URIs reached without a listing (through a
   * template or a rewritten namespace): a filter applies to every URI a read can name, in normal
   * form.
   */
  resourceFilters: ReadonlyMap<string, (uri: string) => boolean>;
  /** Digests of what clients would see, per list: equal means unchanged. */
  digests: { prompts: string; resources: string };
  diagnostics: readonly Diagnostic[];
}

export const emptySurface: Surface = {
  prompts: [],
  promptByName: new Map(),
  resources: [],
  resourceByUri: new Map(),
  templates: [],
  labels: new Map(),
  resourceFilters: new Map(),
  digests: { prompts: digestOf('[]'), resources: digestOf('[][]') },
  diagnostics: [],
};

/**
 * A server's resources allow/deny, matched against URIs in normal form: its globs are put in the
 * same form, so `MEMO://Notes/*` still means what it says.
 */
function resourceFilter(options: ServerConfig['resources']): (uri: string) => boolean {
  return toolFilter({
    ...(options.allow ? { allow: options.allow.map(normalizeUriPattern) } : {}),
    ...(options.deny ? { deny: options.deny.map(normalizeUriPattern) } : {}),
  });
}

/** The label that stands for a server in grants and rewritten URIs. */
export function labelOf(server: ServerConfig): string {
  return server.prefix === false ? server.name : server.prefix;
}

const byKey =
  <T>(key: (t: T) => string) =>
  (a: T, b: T) => {
    const x = key(a);
    const y = key(b);
    return x < y ? -1 : x > y ? 1 : 0;
  };

export function buildSurface(
  inputs: readonly SurfaceInput[],
  options: { maxDescriptionBytes: number; reserved?: ReadonlySet<string> },
): Surface {
  const diagnostics: Diagnostic[] = [];
  const labels = new Map<string, string>();
  const resourceFilters = new Map<string, (uri: string) => boolean>();

  // Prompts: names exactly as tools get them, in their own namespace.
  const requests: NameRequest[] = [];
  const pending: { server: ServerConfig; prompt: Prompt; quarantined: boolean; override?: PromptOverride }[] =
    [];
  const reserved =
    options.reserved ?? new Set(inputs.flatMap((i) => (i.server.prefix ? [i.server.prefix] : [])));
  for (const { server, prompts, quarantinedPrompts = [] } of inputs) {
    labels.set(labelOf(server), server.name);
    const filtered = toolFilter(server.prompts);
    // Prompts share the tools' naming, so an unprefixed server may not squat a namespace (#13.11).
    const visible = (name: string) => filtered(name) && !squattedNamespace(server.prefix, name, reserved);
    const all = [
      ...prompts.map((prompt) => ({ prompt, quarantined: false })),
      ...quarantinedPrompts.map((prompt) => ({ prompt, quarantined: true })),
    ]
      .filter((p) => visible(p.prompt.name))
      .sort(byKey((p) => p.prompt.name));
    for (const item of all) {
      // A prompt override (#54) renames and redescribes it before names are assigned.
      const o = server.promptOverrides;
      const override = o && Object.hasOwn(o, item.prompt.name) ? o[item.prompt.name] : undefined;
      const shown = override ? overridePrompt(item.prompt, override) : item.prompt;
      requests.push({ server: server.name, prefix: server.prefix, tool: shown.name });
      pending.push({
        server,
        prompt: item.prompt,
        quarantined: item.quarantined,
        ...(override ? { override } : {}),
      });
    }
  }
  const { names, collisions } = assignNames(requests);
  for (const c of collisions) {
    diagnostics.push({
      rule: 'name-collision',
      server: c.dropped.server,
      message: `prompt ${c.name} is already published by server ${c.kept.server}; give server ${c.dropped.server} a prefix`,
    });
  }
  const promptEntries: PromptEntry[] = [];
  names.forEach((name, i) => {
    const src = pending[i]!;
    if (name === null) return;
    const prompt = src.quarantined
      ? // The drifted text is never shown: our stand-in names the server and nothing else.
        { name, description: quarantineDescription(src.server.name) }
      : src.override
        ? { ...overridePrompt(boundPrompt(src.prompt, options), src.override), name }
        : { ...boundPrompt(src.prompt, options), name };
    promptEntries.push({
      name,
      server: src.server.name,
      original: src.prompt.name,
      prompt,
      ...(src.quarantined ? { quarantined: true } : {}),
    });
  });

  // Resources and templates: the first server in config order keeps a URI, later ones are rewritten.
  const resourceEntries: ResourceEntry[] = [];
  const usedUris = new Set<string>();
  const templateEntries: TemplateEntry[] = [];
  const usedTemplates = new Set<string>();
  for (const { server, resources, templates, quarantinedTemplates = [] } of inputs) {
    const label = labelOf(server);
    const visible = resourceFilter(server.resources);
    resourceFilters.set(server.name, visible);
    // Filters, grants and clients see each URI in normal form (SECURITY J4); one that has none is
    // withheld, so what a filter passes is what a read names.
    const listed: { raw: Resource; normal: string }[] = [];
    for (const raw of resources) {
      const normal = typeof raw.uri === 'string' ? normalizeUri(raw.uri) : undefined;
      if (!normal?.ok) {
        diagnostics.push({
          rule: 'unroutable-uri',
          server: server.name,
          message: `resource withheld: ${normal ? normal.reason : 'its URI is not a string'}`,
        });
      } else if (visible(normal.uri)) listed.push({ raw, normal: normal.uri });
    }
    for (const { raw, normal } of listed.sort(byKey((r) => r.normal))) {
      const bounded = boundResource(raw, options);
      if (isFinding(bounded)) {
        diagnostics.push({
          rule: bounded.rule,
          server: server.name,
          message: `resource withheld: its URI cannot be routed`,
        });
        continue;
      }
      let uri = normal;
      if (usedUris.has(uri)) {
        const rewritten = normalizeUri(rewriteUri(uri, label));
        if (!rewritten.ok) continue;
        uri = rewritten.uri;
      }
      if (usedUris.has(uri)) continue;
      usedUris.add(uri);
      resourceEntries.push({
        uri,
        server: server.name,
        original: raw.uri,
        resource: { ...bounded, uri },
        grantKey: `${label}__${normal}`,
      });
    }
    const all = [
      ...templates.map((template) => ({ template, quarantined: false })),
      ...quarantinedTemplates.map((template) => ({ template, quarantined: true })),
    ]
      .filter((t) => visible(normalizeUriPattern(t.template.uriTemplate)))
      .sort(byKey((t) => t.template.uriTemplate));
    for (const { template: raw, quarantined } of all) {
      const bounded = boundTemplate(raw, options);
      if (isFinding(bounded)) {
        diagnostics.push({
          rule: bounded.rule,
          server: server.name,
          message: 'resource template withheld: it cannot be routed',
        });
        continue;
      }
      let uriTemplate = raw.uriTemplate;
      const rewritten = usedTemplates.has(uriTemplate);
      if (rewritten) uriTemplate = rewriteUri(uriTemplate, label);
      if (usedTemplates.has(uriTemplate)) continue;
      usedTemplates.add(uriTemplate);
      const template = quarantined
        ? { uriTemplate, name: bounded.name, description: quarantineDescription(server.name) }
        : { ...bounded, uriTemplate };
      templateEntries.push({
        uriTemplate,
        server: server.name,
        original: raw.uriTemplate,
        template,
        grantKey: `${label}__${normalizeUriPattern(raw.uriTemplate)}`,
        ...(rewritten ? { rewrittenFor: label } : {}),
        matches: templateMatcher(uriTemplate),
        ...(quarantined ? { quarantined: true } : {}),
      });
    }
  }
  return {
    prompts: promptEntries,
    promptByName: new Map(promptEntries.map((e) => [e.name, e])),
    resources: resourceEntries,
    resourceByUri: new Map(resourceEntries.map((e) => [e.uri, e])),
    templates: templateEntries,
    labels,
    resourceFilters,
    digests: {
      prompts: digestOf(JSON.stringify(promptEntries.map((e) => e.prompt))),
      resources: digestOf(
        JSON.stringify(resourceEntries.map((e) => e.resource)) +
          JSON.stringify(templateEntries.map((e) => e.template)),
      ),
    },
    diagnostics,
  };
}
