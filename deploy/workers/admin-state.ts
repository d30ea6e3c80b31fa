/**
 * The management plane's shared state on Workers (#52): servers added through the admin API, the
 * tokens seen and revoked, and the approvals queue. They live in one Durable Object (a
 * tenant-class object of its own name, like the deployment key's), in its SQLite, through the same
 * stores as Node (`SqlServerStore`, `SqlTokenStore`, `SqlApprovalStore` over the one SQL seam,
 * src/store/sql.ts). Every isolate and every object reaches them through the same interfaces
 * (`ServerStore`, `TokenStore`, `ApprovalStore`), each call a request to that object.
 *
 * Servers and tokens are refreshed the way Node instances do: the epoch at most every few seconds,
 * the list only when it moved (gateway/managed-servers.ts, gateway/token-registry.ts), one small
 * request per place per interval, never one per client request. The approvals queue is read and
 * written where Node reads and writes its database: only by a call that waits for an operator (and
 * by the operator), so wherever a queued call is served (a tenant's object for a 2025 client's
 * session, a server's object for a 2026 client), it is staged, listed, decided and claimed in one
 * place, and the claim's UPDATE in that one SQLite is what makes a run happen once (decision 0049).
 */

import { ManifoldError } from '../../src/errors.js';
import type { Gateway } from '../../src/gateway/gateway.js';
import { REVOCATION_POLL_MS } from '../../src/gateway/token-registry.js';
import type {
  ApprovalQuery,
  ApprovalRecord,
  ApprovalStore,
  StageBounds,
  StagedApproval,
} from '../../src/store/approvals.js';
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
  | { op: 'tokens.revoked'; args: [number] }
  | { op: 'approvals.stage'; args: [StagedApproval, StageBounds, number] }
  | { op: 'approvals.get' | 'approvals.deliver'; args: [string] }
  | { op: 'approvals.finish'; args: [string, string] }
  | { op: 'approvals.find'; args: [string, string, string] }
  | { op: 'approvals.list'; args: [ApprovalQuery, number] }
  | { op: 'approvals.decide'; args: [string, 'approved' | 'declined', string, string | null, number] }
  | { op: 'approvals.claimRun'; args: [string, number] };

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
  const approvals = store.approvals;
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
    case 'approvals.stage':
      value = await approvals.stage(a[0] as StagedApproval, a[1] as StageBounds, a[2] as number);
      break;
    case 'approvals.get':
      value = await approvals.get(a[0] as string);
      break;
    case 'approvals.find':
      value = await approvals.find(a[0] as string, a[1] as string, a[2] as string);
      break;
    case 'approvals.list':
      value = await approvals.list(a[0] as ApprovalQuery, a[1] as number);
      break;
    case 'approvals.decide':
      value = await approvals.decide(
        a[0] as string,
        a[1] as 'approved' | 'declined',
        a[2] as string,
        (a[3] as string | null) ?? undefined,
        a[4] as number,
      );
      break;
    case 'approvals.claimRun':
      value = await approvals.claimRun(a[0] as string, a[1] as number);
      break;
    case 'approvals.finish':
      value = await approvals.finish(a[0] as string, a[1] as string);
      break;
    case 'approvals.deliver':
      value = await approvals.deliver(a[0] as string);
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
    if (!res.ok) {
      throw new ManifoldError('ERR_STORE_UNAVAILABLE', 'the shared state is unavailable: try again');
    }
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

/**
 * The approvals queue, in the shared state's object: one queue for every place, so the operator
 * sees and decides every queued call, and one UPDATE there claims each run (src/store/approvals.ts).
 */
export class RemoteApprovalStore implements ApprovalStore {
  constructor(private readonly c: AdminStateClient) {}
  stage(a: StagedApproval, bounds: StageBounds, now: number): Promise<boolean> {
    return this.c.call('approvals.stage', [a, bounds, now]);
  }
  async get(id: string): Promise<ApprovalRecord | undefined> {
    return (await this.c.call<ApprovalRecord | null>('approvals.get', [id])) ?? undefined;
  }
  async find(principal: string, tool: string, digest: string): Promise<ApprovalRecord | undefined> {
    return (
      (await this.c.call<ApprovalRecord | null>('approvals.find', [principal, tool, digest])) ?? undefined
    );
  }
  list(query: ApprovalQuery, now: number): Promise<ApprovalRecord[]> {
    return this.c.call('approvals.list', [query, now]);
  }
  decide(
    id: string,
    decision: 'approved' | 'declined',
    by: string,
    reason: string | undefined,
    now: number,
  ): Promise<boolean> {
    return this.c.call('approvals.decide', [id, decision, by, reason ?? null, now]);
  }
  claimRun(id: string, now: number): Promise<boolean> {
    return this.c.call('approvals.claimRun', [id, now]);
  }
  async finish(id: string, result: string): Promise<void> {
    await this.c.call('approvals.finish', [id, result]);
  }
  deliver(id: string): Promise<boolean> {
    return this.c.call('approvals.deliver', [id]);
  }
}

/** A place's own store (its object's SQLite, or memory in an isolate), with the shared parts swapped in. */
export class WithAdminState implements StateStore {
  readonly approvals: ApprovalStore;
  readonly storedServers: ServerStore;
  readonly tokens: TokenStore;
  readonly watchTrust?: StateStore['watchTrust'];

  constructor(
    private readonly own: StateStore,
    shared: { storedServers: ServerStore; tokens: TokenStore; approvals: ApprovalStore },
  ) {
    this.approvals = shared.approvals;
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
    approvals: new RemoteApprovalStore(shared),
  });
  return { store, shared };
}
