/**
 * The merged catalog and surface from the upstreams' verified listings (a live one, or the warm
 * one from the store until the upstream answers), and which lists a client would see changed.
 */
import { buildCatalog, type Catalog, type CatalogInput } from '../aggregate/catalog.js';
import { buildSurface, type Surface, type SurfaceInput } from '../aggregate/surface.js';
import type { Config, GatewayConfig } from '../config/types.js';
import { splitDriftListing, splitNames } from '../guards/drift/kinds.js';
import type { VerifiedListing } from '../guards/drift/verdict.js';
import type { Logger } from '../lib/log.js';
import type { Upstream } from '../upstream/upstream.js';
import type { ChangeKind } from './gateway.js';

export interface CatalogState {
  upstreams: readonly Upstream[];
  /** Warm listings; an upstream's is dropped once it is ready with its own. */
  warm: Map<string, VerifiedListing>;
  gateway: GatewayConfig;
  reserved: ReadonlySet<string>;
  catalog: Catalog;
  surface: Surface;
  log: Logger;
}

export interface NextCatalogs {
  inputs: CatalogInput[];
  /** Set when the tool catalog changed (its signature), or the surface (its digests). */
  catalog?: Catalog;
  surface?: Surface;
  changed: Set<ChangeKind>;
}

/** Every configured server's name prefix: no unprefixed server may publish into one. */
export function reservedPrefixes(config: Config): ReadonlySet<string> {
  return new Set(config.servers.flatMap((s) => (s.prefix ? [s.prefix] : [])));
}

/** Recomputes the merged catalog; `changed` names each list whose content changed. */
export function nextCatalogs(s: CatalogState): NextCatalogs {
  const inputs = [];
  const surfaceInputs: SurfaceInput[] = [];
  for (const u of s.upstreams) {
    let listing: VerifiedListing | undefined;
    if (u.state === 'ready' && u.verified) {
      listing = u.verified;
      s.warm.delete(u.name);
    } else listing = s.warm.get(u.name) ?? u.stored;
    if (!listing || listing.identityChanged) continue;
    // Drift covers tools, prompts and templates as one listing; split it back into its kinds.
    const trusted = splitDriftListing(listing.trusted);
    const quarantined = splitDriftListing(listing.quarantined);
    inputs.push({
      server: u.config,
      tools: trusted.tools,
      quarantined: quarantined.tools,
      removed: splitNames(listing.removed).tools,
    });
    surfaceInputs.push({
      server: u.config,
      prompts: trusted.prompts,
      quarantinedPrompts: quarantined.prompts,
      // Resources are data, not instructions: not drift-checked, and only served while live (or
      // stopped while unused, #53: the last live listing, read by starting it again).
      resources: u.state === 'ready' || u.state === 'idle' ? u.resources : [],
      templates: trusted.templates,
      quarantinedTemplates: quarantined.templates,
    });
  }
  const g = s.gateway;
  const changed = new Set<ChangeKind>();
  let catalog: Catalog | undefined;
  let nextSurface: Surface | undefined;
  const next = buildCatalog(inputs, s.catalog.version + 1, {
    maxDescriptionBytes: g.maxDescriptionBytes,
    maxSchemaBytes: g.maxSchemaBytes,
    reserved: s.reserved,
  });
  if (next.signature !== s.catalog.signature) {
    for (const d of next.diagnostics) {
      const level = d.rule === 'name-collision' || d.rule === 'schema-too-large' ? 'error' : 'warn';
      s.log[level]('catalog.diagnostic', { ...d });
    }
    catalog = next;
    changed.add('tools');
  }
  const surface = buildSurface(surfaceInputs, {
    maxDescriptionBytes: g.maxDescriptionBytes,
    reserved: s.reserved,
  });
  if (surface.digests.prompts !== s.surface.digests.prompts) changed.add('prompts');
  if (surface.digests.resources !== s.surface.digests.resources) changed.add('resources');
  if (changed.has('prompts') || changed.has('resources')) {
    for (const d of surface.diagnostics) s.log.warn('catalog.diagnostic', { ...d });
    nextSurface = surface;
  }
  return {
    inputs,
    changed,
    ...(catalog ? { catalog } : {}),
    ...(nextSurface ? { surface: nextSurface } : {}),
  };
}
