/**
 * The management plane's shared state on Workers (#52): servers added through the admin API and
 * the tokens seen and revoked. They live in one Durable Object (a tenant-class object of its own
 * name, like the deployment key's), in its SQLite, through the same stores as Node
 * (`SqlServerStore`, `SqlTokenStore` over the one SQL seam, src/store/sql.ts). Every isolate and
 * every object reaches them through the same interfaces (`ServerStore`, `TokenStore`), each call a
 * request to that object, and refreshes its copy the way Node instances do: the epoch at most every
 * few seconds, the list only when it moved (gateway/managed-servers.ts, gateway/token-registry.ts).
 * That is one small request per place per interval, never one per client request.
 */
import type { Gateway } from '../../src/gateway/gateway.js';
import { REVOCATION_POLL_MS } from '../../src/gateway/token-registry.js';
import type { SqlStateStore, StateStore } from '../../src/store/state.js';
import type { ServerStore, StoredServer } from '../../src/store/stored-servers.js';
import type { SeenToken, TokenStore } from '../../src/store/tokens.js';
import { INTERNAL, INTERNAL_ORIGIN } from './boot.js';

/** The object that keeps the shared state (a TENANTS object; tenants' own are `tenant:<key>`). */
export const ADMIN_OBJECT = 'manifold:admin';
const PATH = `${INTERNAL}admin-state`;

/** Whether a request to a tenant-class object is a call on the shared state (from the Worker's places). */
export function isAdminStateRequest(request: Request): boolean {
  return new URL(request.url).pathname === PATH;
}

type Call =
  | { op: 'servers.list' | 'servers.epoch' | 'tokens.epoch'; args: [] }
  | { op: 'servers.put'; args: [StoredServer] }
  | { op: 'servers.remove'; args: [string] }
  | { op: 'tokens.seen'; args: [Omit<SeenToken, 'revokedAt' | 'revokedBy'>, number] }
  | { op: 'tokens.list'; args: [number, number] }
  | { op: 'tokens.revoke'; args: [string, string, number] }
  | { op: 'tokens.revoked'; args: [number] };

/** The object's side: one call on its own stores, answered as `{ value }`. */
export async function answerAdminState(store: SqlStateStore, request: Request): Promise<Response> {
  let call: Call;
  try {
    call = (await request.json()) as Call;
  } catch {
    return Response.json({ error: 'a call on the shared state is JSON' }, { status: 400 });
  }
  const servers = store.storedServers;
  const tokens = store.tokens;
  const a = call.args;
  let value: unknown;
  switch (call.op) {
    case 'servers.list':
      value = await servers.list();
      break;
    case 'servers.epoch':
      value = await servers.epoch();
      break;
    case 'servers.put':
      value = await servers.put(a[0] as StoredServer);
      break;
    case 'servers.remove':
      value = await servers.remove(a[0] as string);
      break;
    case 'tokens.seen':
      value = await tokens.seen(a[0] as Omit<SeenToken, 'revokedAt' | 'revokedBy'>, a[1] as number);
      break;
    case 'tokens.list':
      value = await tokens.list(a[0] as number, a[1] as number);
      break;
    case 'tokens.revoke':
      value = await tokens.revoke(a[0] as string, a[1] as string, a[2] as number);
      break;
    case 'tokens.revoked':
      value = await tokens.revoked(a[0] as number);
      break;
    case 'tokens.epoch':
      value = await tokens.epoch();
      break;
    default:
      return Response.json({ error: 'unknown call on the shared state' }, { status: 400 });
  }
  return Response.json({ value: value ?? null });
}

/** The places' side: each call a request to the shared state's object. */
export class AdminStateClient {
  /** Writes begun by a request that does not wait for them (a token's first sighting). */
  private readonly pending = new Set<Promise<unknown>>();

  constructor(private readonly tenants: DurableObjectNamespace) {}

  async call<T>(op: Call['op'], args: unknown[]): Promise<T> {
    const stub = this.tenants.get(this.tenants.idFromName(ADMIN_OBJECT));
    const res = await stub.fetch(`${INTERNAL_ORIGIN}${PATH}`, {
      method: 'POST',
      body: JSON.stringify({ op, args }),
    });
    if (!res.ok) throw new Error(`the shared state object answered ${res.status}`);
    return ((await res.json()) as { value: T }).value;
  }

  /** A write nobody awaits, kept until it settles so the request can be held open for it. */
  background<T>(write: Promise<T>): Promise<T> {
    const kept = write.finally(() => this.pending.delete(kept));
    this.pending.add(kept);
    return kept;
  }

  /** For `waitUntil`: settles once the writes begun so far have. */
  settled(): Promise<unknown> {
    return Promise.allSettled([...this.pending]);
  }
}

/** Servers added through the admin API, in the shared state's object. */
export class RemoteServerStore implements ServerStore {
  constructor(private readonly c: AdminStateClient) {}
  list(): Promise<StoredServer[]> {
    return this.c.call('servers.list', []);
  }
  async put(server: StoredServer): Promise<void> {
    await this.c.call('servers.put', [server]);
  }
  remove(name: string): Promise<boolean> {
    return this.c.call('servers.remove', [name]);
  }
  epoch(): Promise<number> {
    return this.c.call('servers.epoch', []);
  }
}

/**
 * The stored servers as one server's object sees them: its own entry alone. The object serves
 * that one server, so another server's change never reloads it (the epoch still moves, and the
 * list, filtered, is then the same).
 */
export class OneServerStore implements ServerStore {
  constructor(
    private readonly all: ServerStore,
    private readonly name: string,
  ) {}
  async list(): Promise<StoredServer[]> {
    return (await this.all.list()).filter((s) => s.name === this.name);
  }
  put(server: StoredServer): Promise<void> {
    return this.all.put(server);
  }
  remove(name: string): Promise<boolean> {
    return this.all.remove(name);
  }
  epoch(): Promise<number> {
    return this.all.epoch();
  }
}

/** Tokens seen and revoked, in the shared state's object. */
export class RemoteTokenStore implements TokenStore {
  constructor(private readonly c: AdminStateClient) {}
  async seen(token: Omit<SeenToken, 'revokedAt' | 'revokedBy'>, now: number): Promise<void> {
    await this.c.background(this.c.call('tokens.seen', [token, now]));
  }
  list(limit: number, now: number): Promise<SeenToken[]> {
    return this.c.call('tokens.list', [limit, now]);
  }
  revoke(id: string, by: string, now: number): Promise<boolean> {
    return this.c.call('tokens.revoke', [id, by, now]);
  }
  revoked(now: number): Promise<string[]> {
    return this.c.call('tokens.revoked', [now]);
  }
  epoch(): Promise<number> {
    return this.c.call('tokens.epoch', []);
  }
}

/** A place's own store (its object's SQLite, or memory in an isolate), with the shared parts swapped in. */
export class WithAdminState implements StateStore {
  readonly approvals: StateStore['approvals'];
  readonly storedServers: ServerStore;
  readonly tokens: TokenStore;
  readonly watchTrust?: StateStore['watchTrust'];

  constructor(
    private readonly own: StateStore,
    shared: { storedServers: ServerStore; tokens: TokenStore },
  ) {
    this.approvals = own.approvals;
    this.storedServers = shared.storedServers;
    this.tokens = shared.tokens;
    if (own.watchTrust) this.watchTrust = (listener) => own.watchTrust?.(listener);
  }

  get: StateStore['get'] = (name) => this.own.get(name);
  saveCatalog: StateStore['saveCatalog'] = (identity, tools, now) =>
    this.own.saveCatalog(identity, tools, now);
  createBaseline: StateStore['createBaseline'] = (identity, baseline, now) =>
    this.own.createBaseline(identity, baseline, now);
  retrust: StateStore['retrust'] = (identity, baseline, now) => this.own.retrust(identity, baseline, now);
  trustEpoch: StateStore['trustEpoch'] = () => this.own.trustEpoch();
  claim: StateStore['claim'] = (key, expiresAt, now) => this.own.claim(key, expiresAt, now);
  saveRun: StateStore['saveRun'] = (key, journal, expiresAt, now) =>
    this.own.saveRun(key, journal, expiresAt, now);
  loadRun: StateStore['loadRun'] = (key, now) => this.own.loadRun(key, now);
  recordDrift: StateStore['recordDrift'] = (event) => this.own.recordDrift(event);
  driftHistory: StateStore['driftHistory'] = (server, tool, limit) =>
    this.own.driftHistory(server, tool, limit);
  close = () => this.own.close?.();
}

/**
 * A place's refresh of the shared state, at the start of a request, in that request's own context
 * (an isolate's I/O belongs to the request that starts it, so no request waits on another's read):
 * at most once per interval per place, claimed before it reads, as snapshots are (fresh.ts).
 */
export class AdminStatePull {
  private at = Number.NEGATIVE_INFINITY;

  async pull(gateway: Gateway, now: number): Promise<void> {
    if (now - this.at < REVOCATION_POLL_MS) return;
    this.at = now;
    await Promise.allSettled([gateway.tokens.pull(), gateway.managed.poll()]);
  }
}

/**
 * A place's store with the shared state swapped in, and the client that reaches it. `server`: an
 * upstream object's own server, the only stored entry it applies.
 */
export function withSharedState(
  tenants: DurableObjectNamespace,
  own: StateStore,
  server?: string,
): { store: StateStore; shared: AdminStateClient } {
  const shared = new AdminStateClient(tenants);
  const servers = new RemoteServerStore(shared);
  const store = new WithAdminState(own, {
    storedServers: server === undefined ? servers : new OneServerStore(servers, server),
    tokens: new RemoteTokenStore(shared),
  });
  return { store, shared };
}
