/**
 * What one principal may see of the prompts, resources and templates, and where a request for
 * one of them goes. Views are computed after the shared surface snapshot and cached per share key
 * (filter after the cache); anything a principal cannot see fails exactly like something that
 * does not exist (SECURITY A13).
 */

import { grantsMatcher } from '../auth/grants.js';
import { type Principal, shareKeyOf } from '../auth/principal.js';
import { ManifoldError } from '../errors.js';
import { callerViewInput, promptValue, resourceValue } from '../guards/policy/input.js';
import { PolicyRules } from '../guards/policy/rules.js';
import { normalizeUri } from '../guards/uri-normal.js';
import { digestOf } from './catalog.js';
import type { PromptEntry, ResourceEntry, Surface, TemplateEntry } from './surface.js';
import { unrewriteUri } from './uris.js';

interface PromptView {
  surface: Surface;
  entries: readonly PromptEntry[];
  names: ReadonlySet<string>;
  digest?: string;
}

interface ResourceView {
  surface: Surface;
  resources: readonly ResourceEntry[];
  templates: readonly TemplateEntry[];
  uris: ReadonlySet<string>;
  digest?: string;
}

/** Where a read (or a completion) goes: the server and the URI it knows. */
export interface ResourceRoute {
  server: string;
  uri: string;
  /** The listed resource or the template it matched, when there is one. */
  template?: TemplateEntry;
  resource?: ResourceEntry;
}

export const unknownPrompt = (name: unknown) =>
  new ManifoldError(
    'ERR_INVALID_PARAMS',
    `Unknown prompt: ${typeof name === 'string' ? name.slice(0, 128) : ''}`,
  );
export const unknownResource = (uri: unknown) =>
  new ManifoldError(
    'ERR_RESOURCE_UNKNOWN',
    `Resource not found: ${typeof uri === 'string' ? uri.slice(0, 256) : ''}`,
  );

/**
 * The normal form of a URI taken out of a rewritten namespace, where it has one: a rewritten
 * `manifold://` URI carries its original percent-encoded, so that one is normalised afresh.
 */
function upstreamForm(original: string | undefined): string | undefined {
  if (original === undefined) return undefined;
  const normal = normalizeUri(original);
  return normal.ok ? normal.uri : undefined;
}

/** The servers a principal's profile shows (#17); every server without one. */
const onServers = (principal: Principal) => {
  const servers = principal.servers;
  return servers ? (server: string) => servers.has(server) : () => true;
};

export class SurfaceViews {
  private prompts = new Map<string, PromptView>();
  private resources = new Map<string, ResourceView>();

  constructor(
    private readonly current: () => Surface,
    /** The config's policy rules (#51): those that read no arguments cut the views too. */
    private readonly policy: () => PolicyRules = () => PolicyRules.none,
  ) {}

  /** Not hidden by a policy rule that reads no arguments (the same rules decide each request). */
  private allowedBy(principal: Principal, kind: 'prompt' | 'resource') {
    const policy = this.policy();
    if (policy.empty) return undefined;
    // The caller's part of the input is built once for the whole view.
    const method = kind === 'prompt' ? 'prompts/get' : 'resources/read';
    const caller = callerViewInput(principal, principal.profile, method);
    return (e: PromptEntry | ResourceEntry) => {
      const chain = policy.chain(e.server, principal.profile, kind);
      const target = kind === 'prompt' ? promptValue(e as PromptEntry) : resourceValue(e as ResourceEntry);
      return !policy.ruling(chain, { ...caller, [kind]: target }).hidden;
    };
  }

  /** Forgets every view (a reload changed what principals are served, not the surface). */
  clear(): void {
    this.prompts.clear();
    this.resources.clear();
  }

  promptView(principal: Principal): PromptView {
    const surface = this.current();
    const hit = this.prompts.get(shareKeyOf(principal));
    if (hit && hit.surface === surface) return hit;
    const everything = principal.grants === '*' && !principal.cap && !principal.servers;
    const granted = grantsMatcher(principal, 'prompts');
    const shown = onServers(principal);
    const ruled = this.allowedBy(principal, 'prompt');
    let entries = everything
      ? surface.prompts
      : surface.prompts.filter((e) => shown(e.server) && granted(e.name));
    if (ruled) entries = entries.filter(ruled);
    const view: PromptView = { surface, entries, names: new Set(entries.map((e) => e.name)) };
    if (this.prompts.size > 1000) this.prompts.clear();
    this.prompts.set(shareKeyOf(principal), view);
    return view;
  }

  resourceView(principal: Principal): ResourceView {
    const surface = this.current();
    const hit = this.resources.get(shareKeyOf(principal));
    if (hit && hit.surface === surface) return hit;
    const everything = principal.grants === '*' && !principal.cap && !principal.servers;
    const granted = grantsMatcher(principal, 'resources');
    const shown = onServers(principal);
    const ruled = this.allowedBy(principal, 'resource');
    let resources = everything
      ? surface.resources
      : surface.resources.filter((e) => shown(e.server) && granted(e.grantKey));
    if (ruled) resources = resources.filter(ruled);
    const templates = everything
      ? surface.templates
      : surface.templates.filter((e) => shown(e.server) && granted(e.grantKey));
    const view: ResourceView = { surface, resources, templates, uris: new Set(resources.map((e) => e.uri)) };
    if (this.resources.size > 1000) this.resources.clear();
    this.resources.set(shareKeyOf(principal), view);
    return view;
  }

  /** Digests of what the principal sees: equal means nothing to announce to it. */
  digest(principal: Principal, kind: 'prompts' | 'resources'): string {
    if (kind === 'prompts') {
      const v = this.promptView(principal);
      v.digest ??= digestOf(JSON.stringify(v.entries.map((e) => e.prompt)));
      return v.digest;
    }
    const v = this.resourceView(principal);
    v.digest ??= digestOf(
      JSON.stringify(v.resources.map((e) => e.resource)) + JSON.stringify(v.templates.map((e) => e.template)),
    );
    return v.digest;
  }

  resolvePrompt(principal: Principal, name: unknown): PromptEntry {
    const entry = typeof name === 'string' ? this.current().promptByName.get(name) : undefined;
    if (!entry || !this.promptView(principal).names.has(entry.name)) throw unknownPrompt(name);
    return entry;
  }

  /**
   * The server a URI belongs to, for this principal: a listed resource it may see, else a
   * visible template that can expand to it (the first in config order), else a URI in a
   * server's rewritten namespace when the principal may see that server's resources.
   *
   * The URI is normalised first (SECURITY J4), and every match below (listing, template, config
   * filter, grant) reads the normal form, which is also what the upstream is asked for: a
   * `file:///public/../secret` is `file:///secret` to the filters as it is to the server. A URI
   * with no safe normal form is refused as invalid.
   */
  resolveResource(principal: Principal, uri: unknown): ResourceRoute {
    if (typeof uri !== 'string') throw unknownResource(uri);
    const normal = normalizeUri(uri);
    if (!normal.ok) throw new ManifoldError('ERR_INVALID_PARAMS', `invalid resource URI: ${normal.reason}`);
    const asked = normal.uri;
    const view = this.resourceView(principal);
    const listed = view.surface.resourceByUri.get(asked);
    if (listed && view.uris.has(asked))
      return { server: listed.server, uri: listed.original, resource: listed };
    // Unlisted URIs: the server's own allow/deny still applies to the URI it would be asked for.
    const filters = view.surface.resourceFilters;
    const allowed = (server: string, original: string) => filters.get(server)?.(original) ?? false;
    for (const t of view.templates) {
      if (!t.matches(asked)) continue;
      const original = t.rewrittenFor ? upstreamForm(unrewriteUri(asked, t.rewrittenFor)) : asked;
      if (original !== undefined && allowed(t.server, original))
        return { server: t.server, uri: original, template: t };
    }
    const granted =
      principal.grants === '*' && !principal.cap ? () => true : grantsMatcher(principal, 'resources');
    const shown = onServers(principal);
    for (const [label, server] of view.surface.labels) {
      if (!shown(server)) continue;
      const original = upstreamForm(unrewriteUri(asked, label));
      if (original !== undefined && allowed(server, original) && granted(`${label}__${original}`))
        return { server, uri: original };
    }
    throw unknownResource(uri);
  }

  /** The visible template with this exposed text (a completion names the template itself). */
  resolveTemplate(principal: Principal, uriTemplate: unknown): TemplateEntry {
    const t = this.resourceView(principal).templates.find((e) => e.uriTemplate === uriTemplate);
    if (!t) throw unknownResource(uriTemplate);
    return t;
  }
}
