/**
 * Named profiles (#17): each a catalog built from the gateway's verified inputs (its servers, its
 * budget, its tool globs), the principal a request is served as at `/mcp/<profile>`, and the
 * catalog settings (mode, pins, limits) in force for it.
 */

import { type Principal, shareKeyOf } from '../auth/principal.js';
import type { CatalogSettings, Config, ProfileConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { compileGlobs } from '../guards/glob.js';
import type { Logger } from '../lib/log.js';
import { buildCatalog, type Catalog, emptyCatalog, narrowCatalog } from './catalog.js';

export class ProfileSet {
  private readonly catalogs = new Map<string, Catalog>();
  private profiles: ReadonlyMap<string, ProfileConfig>;
  /** Catalog versions (per profile) whose switch to search mode has been logged. */
  private readonly searchLogged = new Set<string>();

  constructor(
    private config: Config,
    private readonly log: Logger,
  ) {
    this.profiles = new Map((config.profiles ?? []).map((p) => [p.name, p]));
  }

  /**
   * A reload's config: its profiles from now on. The catalogs are dropped (the gateway's rebuild
   * that follows makes them again).
   */
  configure(config: Config): void {
    this.config = config;
    this.profiles = new Map((config.profiles ?? []).map((p) => [p.name, p]));
    this.catalogs.clear();
  }

  /**
   * Each profile's catalog, from the same verified inputs: its servers only, its disclosure budget
   * (a server in gateway.disclosure.alwaysLoad keeps its schemas), then its tool globs.
   */
  rebuild(inputs: Parameters<typeof buildCatalog>[0], version: number, reserved: ReadonlySet<string>): void {
    const g = this.config.gateway;
    for (const p of this.profiles.values()) {
      const own = inputs
        .filter((i) => !p.servers || p.servers.includes(i.server.name))
        .map((i) =>
          p.budgetTokens === undefined || g.disclosure.alwaysLoad.includes(i.server.name)
            ? i
            : { ...i, server: { ...i.server, budgetTokens: p.budgetTokens } },
        );
      let catalog = buildCatalog(own, version, {
        maxDescriptionBytes: g.maxDescriptionBytes,
        maxSchemaBytes: g.maxSchemaBytes,
        reserved,
      });
      if (p.tools) catalog = narrowCatalog(catalog, compileGlobs(p.tools));
      this.catalogs.set(p.name, catalog);
    }
  }

  /** A profile's catalog (empty until the first build). */
  catalogOf(profile: string): Catalog {
    return this.catalogs.get(profile) ?? emptyCatalog;
  }

  /**
   * The principal as served at `/mcp/<profile>` (or at `/mcp` with a token bound to a profile by
   * `auth.profileClaim`). Unknown profile: 404. A token bound to another profile: 403, since a
   * token's profile narrows what it sees and a path must never widen it.
   */
  principal(principal: Principal, pathProfile: string | undefined): Principal {
    const bound = principal.boundProfile;
    if (pathProfile !== undefined && !this.profiles.has(pathProfile)) {
      throw new ManifoldError(
        'ERR_PROFILE_UNKNOWN',
        `no profile ${JSON.stringify(pathProfile.slice(0, 64))}`,
      );
    }
    if (bound !== undefined && !this.profiles.has(bound)) {
      throw new ManifoldError(
        'ERR_PROFILE_FORBIDDEN',
        'the token names a profile this gateway does not serve',
      );
    }
    if (bound !== undefined && pathProfile !== undefined && bound !== pathProfile) {
      throw new ManifoldError(
        'ERR_PROFILE_FORBIDDEN',
        `this token is for profile ${bound}: use /mcp/${bound}`,
      );
    }
    const name = pathProfile ?? bound;
    if (name === undefined) return principal;
    const profile = this.profiles.get(name)!;
    return {
      ...principal,
      profile: name,
      key: `${principal.key}#${name}`,
      viewKey: `${principal.viewKey}#${name}`,
      shareKey: `${shareKeyOf(principal)}#${name}`,
      ...(profile.servers ? { servers: new Set(profile.servers) } : {}),
    };
  }

  /** The catalog settings in force for a principal: its profile's, or the gateway's. */
  settingsOf(principal: Principal): CatalogSettings {
    const p = principal.profile === undefined ? undefined : this.profiles.get(principal.profile);
    return p ? p.catalog : this.config.gateway.catalog;
  }

  logSearchSwitch(principal: Principal, catalog: Catalog, count: number, maxTools: number): void {
    const key = `${principal.profile ?? ''}\0${catalog.version}`;
    if (this.searchLogged.has(key)) return;
    if (this.searchLogged.size > 1000) this.searchLogged.clear();
    this.searchLogged.add(key);
    this.log.info('catalog.search_mode', {
      ...(principal.profile ? { profile: principal.profile } : {}),
      tools: count,
      maxTools,
      message: `a view of ${count} tools is over catalog.maxTools (${maxTools}): tools/list lists manifold__search_tools instead`,
    });
  }
}
