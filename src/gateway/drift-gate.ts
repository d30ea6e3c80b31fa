import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import { describeError } from '../errors.js';
import { fingerprintTool } from '../guards/canonical-json.js';
import type { DriftEvent, VerifiedListing } from '../guards/drift/verdict.js';
import { baselineFrom, decideDrift, type ListedTool } from '../guards/drift/verdict.js';
import type { Logger } from '../lib/log.js';
import { identityOf, type ServerIdentity, type StateStore, sameIdentity } from '../store/state.js';

/**
 * Drift quarantine (SECURITY C1–C4): every listing is fingerprinted and compared with the
 * baseline recorded at first trust, before it can reach the catalog. Only `manifold retrust`
 * rewrites a baseline; this class never does (`createBaseline` refuses to overwrite).
 */
export class DriftGate {
  /** (server, tool, fingerprint) already logged, so a periodic recheck does not repeat itself. */
  private logged = new Set<string>();
  /** History events this process wrote (or found written): a recheck does not ask the store again. */
  private recorded = new Set<string>();
  /**
   * Drift decisions made, per server and kind, counted as they are logged (once each, like the
   * log): what `manifold_drift_events_total` reports. Bounded by servers times kinds.
   */
  readonly events = new Map<string, Map<DriftEvent, number>>();

  constructor(
    private readonly store: StateStore,
    private readonly log: Logger,
    private readonly now: () => number,
    /** Interpolated ${VAR} values: redacted from identities, so they are never stored. */
    private readonly secrets: readonly string[] = [],
  ) {}

  async verify(
    server: ServerConfig,
    tools: readonly Tool[],
    options: { save: boolean },
  ): Promise<VerifiedListing> {
    const identity = identityOf(server, this.secrets);
    const log = this.log.child({ server: server.name });
    let row = await this.store.get(server.name);
    if (row && !sameIdentity(row.identity, identity)) {
      this.once(`${server.name}\0identity`, server.name, 'identity_changed', () =>
        log.error('drift.identity_changed', {
          rule: 'identity-changed',
          message: `the configured transport, URL or command of ${server.name} changed since it was trusted; its tools are withheld until an operator runs: manifold retrust ${server.name}`,
        }),
      );
      return { trusted: [], quarantined: [], removed: [], withheld: [], identityChanged: true };
    }
    if (options.save) await this.store.saveCatalog(identity, [...tools], this.now());
    if (!row?.baseline && !row?.baselineUnreadable && server.trust === 'review') {
      // A server that starts untrusted (#54, SECURITY J3; one added from a registry): its first
      // listing is held, whole, until an operator accepts it with `manifold retrust`.
      this.once(`${server.name}\0review`, server.name, 'withheld', () =>
        log.warn('drift.held_for_review', {
          rule: 'held-for-review',
          tools: tools.length,
          message: `${server.name} starts untrusted (trust: "review"): its ${tools.length} tools are withheld until an operator reviews them with manifold drift ${server.name} and accepts them with manifold retrust ${server.name}`,
        }),
      );
      const held = await Promise.all(
        tools.map(async (tool) => ({ tool: tool.name, fingerprint: await fingerprintTool(tool) })),
      );
      await this.remember(server.name, 'withheld', held);
      return {
        trusted: [],
        quarantined: [],
        removed: [],
        withheld: tools.map((t) => t.name),
        identityChanged: false,
      };
    }
    if (!row?.baseline) {
      // Trust on first use, keyed by the configured identity, never by the server's own name (C2).
      if (await this.store.createBaseline(identity, await baselineFrom(tools), this.now())) {
        log.info('drift.baseline_recorded', { tools: tools.length });
        return { trusted: [...tools], quarantined: [], removed: [], withheld: [], identityChanged: false };
      }
      row = await this.store.get(server.name);
      if (!row?.baseline) {
        // An unreadable baseline is a trust anchor lost, not a cache miss: refuse until re-trust.
        this.once(`${server.name}\0unreadable`, server.name, 'baseline_unreadable', () =>
          log.error('drift.baseline_unreadable', {
            rule: 'baseline-unreadable',
            message: `the stored baseline of ${server.name} cannot be read; its tools are withheld until an operator runs: manifold retrust ${server.name}`,
          }),
        );
        return { trusted: [], quarantined: [], removed: [], withheld: [], identityChanged: true };
      }
    }
    const listed: ListedTool[] = await Promise.all(
      tools.map(async (tool) => ({ tool, fingerprint: await fingerprintTool(tool) })),
    );
    const byName = new Map(tools.map((t) => [t.name, t]));
    const fingerprints = new Map(listed.map((l) => [l.tool.name, l.fingerprint]));
    const held: { tool: string; fingerprint: string; kind: 'quarantined' | 'withheld' }[] = [];
    const out: VerifiedListing = {
      trusted: [],
      quarantined: [],
      removed: [],
      withheld: [],
      identityChanged: false,
    };
    for (const v of decideDrift(row.baseline, listed, { trustAnnotations: server.trustAnnotations })) {
      switch (v.kind) {
        case 'trusted':
          out.trusted.push(byName.get(v.name)!);
          break;
        case 'quarantined':
          out.quarantined.push(byName.get(v.name)!);
          held.push({ tool: v.name, fingerprint: v.newFingerprint, kind: 'quarantined' });
          // The new text is never logged: only names and fingerprints.
          this.once(`${server.name}\0q\0${v.name}\0${v.newFingerprint}`, server.name, 'quarantined', () =>
            log.warn('drift.quarantined', {
              tool: v.name,
              oldFingerprint: v.oldFingerprint,
              newFingerprint: v.newFingerprint,
              reasons: v.reasons,
            }),
          );
          break;
        case 'withheld':
          out.withheld.push(v.name);
          held.push({ tool: v.name, fingerprint: fingerprints.get(v.name) ?? '', kind: 'withheld' });
          this.once(`${server.name}\0w\0${v.name}`, server.name, 'withheld', () =>
            log.warn('drift.withheld', { tool: v.name }),
          );
          break;
        case 'removed':
          out.removed.push(v.name);
          this.once(`${server.name}\0r\0${v.name}`, server.name, 'removed', () =>
            log.info('drift.removed', { tool: v.name }),
          );
          break;
      }
    }
    for (const kind of ['quarantined', 'withheld'] as const) {
      await this.remember(
        server.name,
        kind,
        held.filter((h) => h.kind === kind),
      );
    }
    return out;
  }

  /**
   * Drift history (#52): what was held back, in the store, so the console shows it per tool on
   * every instance. The store skips a decision it already holds; a failure to write history is
   * logged and never changes the verdict.
   */
  private async remember(
    server: string,
    kind: 'quarantined' | 'withheld',
    held: readonly { tool: string; fingerprint: string }[],
  ): Promise<void> {
    const key = (h: { tool: string; fingerprint: string }) =>
      `${server}\0h\0${kind}\0${h.tool}\0${h.fingerprint}`;
    const fresh = held.filter((h) => !this.recorded.has(key(h)));
    if (fresh.length === 0) return;
    if (this.recorded.size > 10_000) this.recorded.clear();
    try {
      for (const h of fresh) {
        await this.store.recordDrift({
          server,
          tool: h.tool,
          kind,
          fingerprint: h.fingerprint,
          at: this.now(),
        });
        this.recorded.add(key(h));
      }
    } catch (e) {
      this.log.warn('drift.history_unwritten', { server, error: describeError(e) });
    }
  }

  /** Cached listing of a server whose identity still matches, for a warm start. */
  async cachedTools(server: ServerConfig): Promise<Tool[] | undefined> {
    const row = await this.store.get(server.name);
    if (!row?.catalog || !sameIdentity(row.identity, identityOf(server, this.secrets))) return undefined;
    return row.catalog;
  }

  trustEpoch(): Promise<number> {
    return this.store.trustEpoch();
  }

  /** The identity a configured server is stored under (its `${VAR}` values redacted). */
  identity(server: ServerConfig): ServerIdentity {
    return identityOf(server, this.secrets);
  }

  /** After a re-trust, quarantine and identity messages may be logged again. */
  forget(): void {
    this.logged.clear();
    this.recorded.clear();
  }

  private once(key: string, server: string, event: DriftEvent, fn: () => void): void {
    if (this.logged.has(key)) return;
    if (this.logged.size > 10_000) this.logged.clear();
    this.logged.add(key);
    let counts = this.events.get(server);
    if (!counts) {
      counts = new Map();
      this.events.set(server, counts);
    }
    counts.set(event, (counts.get(event) ?? 0) + 1);
    fn();
  }
}
