/**
 * Rate limits shared by every Worker isolate (#15): a tenant's calls are counted in that tenant's
 * Durable Object, by leased blocks of a fixed one-minute window (src/auth/leased-limit.ts states
 * the bounds). An isolate spends a block locally and sends the object one request per block, not
 * one per call; a tenant without a limit never reaches its object.
 *
 * - The object side, `answerLease`: the tenant's object calls it for `POST /__manifold/lease` with
 *   `{tenant, window, block, limit}` and answers `{granted}` from a row per (window, tenant) in its
 *   SQLite storage, read and written in one `transactionSync`, sweeping windows older than the
 *   previous one when a window opens.
 * - The isolate side, `tenantLimiter(namespace)`: a CallLimiterFactory whose lease is that request,
 *   sent to `namespace.get(namespace.idFromName(tenantObjectName(tenant)))`, with in-flight
 *   leases unshared (leased-limit.ts `shareInFlight` says why).
 */
import * as z from 'zod/v4-mini';
import { type LeaseFn, leasedLimiter, WINDOW_MS } from '../../src/auth/leased-limit.js';
import type { CallLimiterFactory } from '../../src/auth/shared-limit.js';
import type { Logger } from '../../src/lib/log.js';

/** The path of the lease request inside the tenant's object. */
export const LEASE_PATH = '/__manifold/lease';
/**
 * The URL the isolate side sends. Its host is one no public route can carry, so an object that
 * checks it (isLeaseRequest) does not take a forwarded request from the internet for a lease; the
 * Worker's own entry should not forward `/__manifold/` paths to the object either.
 */
export const LEASE_URL = `https://manifold-tenant.internal${LEASE_PATH}`;
/** Lease bodies are a few numbers and a tenant name; anything longer is refused before parsing. */
const MAX_BODY_BYTES = 4096;
const MAX_TENANT_CHARS = 1024;

/**
 * The name of a tenant's Durable Object (`idFromName`). The gateway's tenant object (legacy
 * sessions) must use the same name, so that a tenant's count and sessions share one object.
 */
export function tenantObjectName(tenant: string): string {
  return `tenant:${tenant}`;
}

/** What the object side needs of `ctx.storage` (a SQLite-backed Durable Object's). */
export interface LimitStorage {
  sql: { exec(query: string, ...bindings: (string | number | null)[]): { toArray(): unknown[] } };
  transactionSync<T>(fn: () => T): T;
}

/** A lease body: no field is trusted unchecked, and a bad one is a 400. */
const LEASE_BODY = z
  .strictObject({
    tenant: z.string().check(z.minLength(1), z.maxLength(MAX_TENANT_CHARS)),
    // A window's start: a non-negative multiple of WINDOW_MS.
    window: z.int().check(z.nonnegative(), z.multipleOf(WINDOW_MS)),
    block: z.int().check(z.positive()),
    limit: z.int().check(z.positive()),
  })
  .check(z.refine((b) => b.block <= b.limit, '"block" must be at most "limit"'));
export type LeaseBody = z.infer<typeof LEASE_BODY>;

const SCHEMA = `CREATE TABLE IF NOT EXISTS manifold_rate_windows (
  window_start INTEGER NOT NULL,
  tenant TEXT NOT NULL,
  used INTEGER NOT NULL,
  PRIMARY KEY (window_start, tenant)
) WITHOUT ROWID`;
const READ = 'SELECT used FROM manifold_rate_windows WHERE window_start = ? AND tenant = ?';
const WRITE = `INSERT INTO manifold_rate_windows (window_start, tenant, used) VALUES (?, ?, ?)
  ON CONFLICT (window_start, tenant) DO UPDATE SET used = excluded.used`;
const SWEEP = 'DELETE FROM manifold_rate_windows WHERE window_start < ?';

/** Storages whose table exists (one object, one storage, created once per object instance). */
const ready = new WeakSet<LimitStorage>();

/**
 * Takes up to `block` calls from the window's row, never past `limit`; returns how many. Read and
 * write are one transaction: atomic even if a later change put an await between them.
 */
export function grantLease(storage: LimitStorage, body: LeaseBody): number {
  const { tenant, window, block, limit } = body;
  if (!ready.has(storage)) {
    storage.sql.exec(SCHEMA);
    ready.add(storage);
  }
  return storage.transactionSync(() => {
    const row = storage.sql.exec(READ, window, tenant).toArray()[0] as { used: number } | undefined;
    const used = row?.used ?? 0;
    const granted = Math.max(0, Math.min(block, limit - used));
    if (granted > 0) storage.sql.exec(WRITE, window, tenant, used + granted);
    // A window's first lease sweeps the ones before the previous window: a handful of rows at most.
    if (row === undefined) storage.sql.exec(SWEEP, window - WINDOW_MS);
    return granted;
  });
}

const refuse = (status: number, error: string) => Response.json({ error }, { status });

/** Whether a request reaching the tenant's object is a lease (its internal URL). */
export function isLeaseRequest(request: Request): boolean {
  const url = new URL(request.url);
  return url.pathname === LEASE_PATH && url.host === new URL(LEASE_URL).host;
}

/**
 * The object side: answers a lease request from the object's storage. Never throws: bad input is
 * 400 (405 for another method, 413 for a long body), a storage failure 503.
 *
 * @example
 * override async fetch(request: Request) {
 *   if (isLeaseRequest(request)) return answerLease(this.ctx.storage, request);
 *   ...
 * }
 */
export async function answerLease(storage: LimitStorage, request: Request): Promise<Response> {
  if (request.method !== 'POST')
    return Response.json({ error: 'lease requests are POST' }, { status: 405, headers: { allow: 'POST' } });
  const declared = Number(request.headers.get('content-length') ?? 0);
  if (declared > MAX_BODY_BYTES) return refuse(413, 'lease body too large');
  let value: unknown;
  try {
    const text = await request.text();
    if (text.length > MAX_BODY_BYTES) return refuse(413, 'lease body too large');
    value = JSON.parse(text);
  } catch {
    return refuse(400, 'bad lease: the body is not JSON');
  }
  const body = LEASE_BODY.safeParse(value);
  if (!body.success) {
    const issue = body.error.issues[0];
    return refuse(400, `bad lease: ${issue?.path.join('.') || 'the body'} (${issue?.code})`);
  }
  try {
    return Response.json({ granted: grantLease(storage, body.data) });
  } catch {
    return refuse(503, 'lease store unavailable');
  }
}

/** What the isolate side needs of a Durable Object namespace binding (`Id` is DurableObjectId). */
export interface TenantNamespace<Id> {
  idFromName(name: string): Id;
  get(id: Id): { fetch(input: string, init?: RequestInit): Promise<Response> };
}

/** A lease answer the object did not give (not 200, or not `{granted}`): the limiter fails closed. */
export class LeaseError extends Error {
  override name = 'LeaseError';
}

/** One lease through the tenant's object. */
export function objectLease<Id>(namespace: TenantNamespace<Id>): LeaseFn {
  return async (tenant, window, block, limit) => {
    const stub = namespace.get(namespace.idFromName(tenantObjectName(tenant)));
    const response = await stub.fetch(LEASE_URL, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tenant, window, block, limit } satisfies LeaseBody),
    });
    if (response.status !== 200) {
      await response.body?.cancel();
      throw new LeaseError(`lease answered ${response.status}`);
    }
    const answer = (await response.json().catch(() => undefined)) as { granted?: unknown } | undefined;
    if (typeof answer?.granted !== 'number') throw new LeaseError('lease answer without "granted"');
    return answer.granted;
  };
}

export interface TenantLimiterOptions {
  log?: Logger;
  /**
   * In the tenant's own object: its tenant and storage, so its own calls lease from the storage
   * directly instead of sending a request to itself. Other tenants still go through their objects.
   */
  local?: { tenant: string; storage: LimitStorage };
}

/**
 * The CallLimiterFactory for a Worker isolate (or a tenant object): every isolate's calls for a
 * tenant are counted in the tenant's object.
 *
 * @example
 * new Gateway({ ..., callLimiter: tenantLimiter(env.TENANTS, { log }) });
 */
export function tenantLimiter<Id>(
  namespace: TenantNamespace<Id>,
  options: TenantLimiterOptions = {},
): CallLimiterFactory {
  const remote = objectLease(namespace);
  const { local } = options;
  const lease: LeaseFn = local
    ? (tenant, window, block, limit) =>
        tenant === local.tenant
          ? new Promise((resolve) => resolve(grantLease(local.storage, { tenant, window, block, limit })))
          : remote(tenant, window, block, limit)
    : remote;
  return leasedLimiter({
    lease,
    shareInFlight: false,
    // Our own LeaseError messages and the runtime's subrequest errors carry no secret.
    describe: (e) => (e instanceof Error ? `${e.name}: ${e.message}`.slice(0, 200) : typeof e),
    ...(options.log ? { log: options.log } : {}),
  });
}
