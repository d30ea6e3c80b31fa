import type { Gateway } from '../../gateway/gateway.js';
import { normalizeUri } from '../../guards/uri-normal.js';

/** Whoever receives `notifications/resources/updated`: a legacy session or a modern listen stream. */
export interface Watcher {
  /** Sends the notification for the URI as the watcher knows it. */
  send(exposedUri: string): void;
}

/** One upstream URI watched upstream, and who watches it (each under the URI it subscribed with). */
interface Target {
  server: string;
  /** The URI the upstream was asked to watch. */
  uri: string;
  watchers: Map<Watcher, string>;
}

/**
 * Resource subscriptions across the edge (spec 2025-11-25: resources/subscribe; 2026-07-28:
 * `resourceSubscriptions` in subscriptions/listen). Each upstream URI is watched upstream once,
 * however many clients watch it, and unwatched when the last one goes; an update goes to every
 * watcher under the URI it subscribed with. URIs are compared in normal form (SECURITY J4), so an
 * update the upstream spells differently still finds the watchers of the same resource.
 */
export class ResourceWatch {
  private readonly targets = new Map<string, Target>();
  private readonly byWatcher = new Map<Watcher, Set<string>>();

  constructor(private readonly gateway: Gateway) {
    gateway.onResourceUpdated((server, uri) => this.updated(server, uri));
  }

  async add(watcher: Watcher, server: string, uri: string, exposed: string): Promise<void> {
    const key = keyOf(server, uri);
    let target = this.targets.get(key);
    const first = !target;
    if (!target) {
      target = { server, uri, watchers: new Map() };
      this.targets.set(key, target);
    }
    target.watchers.set(watcher, exposed);
    let keys = this.byWatcher.get(watcher);
    if (!keys) {
      keys = new Set();
      this.byWatcher.set(watcher, keys);
    }
    keys.add(key);
    if (first) await (await this.gateway.owner(server)).subscribe(uri);
  }

  remove(watcher: Watcher, server: string, uri: string): void {
    this.drop(watcher, keyOf(server, uri));
  }

  /** The watcher is gone (its session ended, its stream closed): nothing more for it. */
  removeAll(watcher: Watcher): void {
    for (const key of [...(this.byWatcher.get(watcher) ?? [])]) this.drop(watcher, key);
    this.byWatcher.delete(watcher);
  }

  private drop(watcher: Watcher, key: string): void {
    this.byWatcher.get(watcher)?.delete(key);
    const target = this.targets.get(key);
    if (!target?.watchers.delete(watcher) || target.watchers.size > 0) return;
    this.targets.delete(key);
    void this.gateway.pool.get(target.server)?.unsubscribe(target.uri);
  }

  private updated(server: string, uri: string): void {
    const target = this.targets.get(keyOf(server, uri));
    if (!target) return;
    for (const [watcher, exposed] of target.watchers) watcher.send(exposed);
  }
}

/** One key per server and resource: the URI in normal form, or as given when it has none. */
function keyOf(server: string, uri: string): string {
  const normal = normalizeUri(uri);
  return JSON.stringify([server, normal.ok ? normal.uri : uri]);
}
