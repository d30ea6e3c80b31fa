import type { Gateway } from '../gateway.js';

/** Whoever receives `notifications/resources/updated`: a legacy session or a modern listen stream. */
export interface Watcher {
  /** Sends the notification for the URI as the watcher knows it. */
  send(exposedUri: string): void;
}

/**
 * Resource subscriptions across the edge (spec 2025-11-25: resources/subscribe; 2026-07-28:
 * `resourceSubscriptions` in subscriptions/listen). Each upstream URI is watched upstream once,
 * however many clients watch it, and unwatched when the last one goes; an update goes to every
 * watcher under the URI it subscribed with.
 */
export class ResourceWatch {
  private readonly targets = new Map<string, Map<Watcher, string>>();
  private readonly byWatcher = new Map<Watcher, Set<string>>();

  constructor(private readonly gateway: Gateway) {
    gateway.onResourceUpdated((server, uri) => this.updated(server, uri));
  }

  async add(watcher: Watcher, server: string, uri: string, exposed: string): Promise<void> {
    const key = `${server}\0${uri}`;
    let watchers = this.targets.get(key);
    const first = !watchers;
    if (!watchers) {
      watchers = new Map();
      this.targets.set(key, watchers);
    }
    watchers.set(watcher, exposed);
    let keys = this.byWatcher.get(watcher);
    if (!keys) {
      keys = new Set();
      this.byWatcher.set(watcher, keys);
    }
    keys.add(key);
    if (first) await (await this.gateway.owner(server)).subscribe(uri);
  }

  remove(watcher: Watcher, server: string, uri: string): void {
    const key = `${server}\0${uri}`;
    this.byWatcher.get(watcher)?.delete(key);
    const watchers = this.targets.get(key);
    if (!watchers?.delete(watcher) || watchers.size > 0) return;
    this.targets.delete(key);
    void this.gateway.pool.get(server)?.unsubscribe(uri);
  }

  /** The watcher is gone (its session ended, its stream closed): nothing more for it. */
  removeAll(watcher: Watcher): void {
    for (const key of [...(this.byWatcher.get(watcher) ?? [])]) {
      const [server, uri] = key.split('\0') as [string, string];
      this.remove(watcher, server, uri);
    }
    this.byWatcher.delete(watcher);
  }

  get size(): number {
    return this.targets.size;
  }

  private updated(server: string, uri: string): void {
    const watchers = this.targets.get(`${server}\0${uri}`);
    if (!watchers) return;
    for (const [watcher, exposed] of watchers) watcher.send(exposed);
  }
}
