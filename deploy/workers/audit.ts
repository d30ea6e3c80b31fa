/**
 * The admin API's audit window on Workers (#52, decision 0048): recent calls gateway-wide,
 * bounded. Calls are served by many isolates, which nobody can enumerate or ask, and by the
 * objects; so each place sends what it audited to one window instead, kept by one object (a
 * tenant-class object of its own name) in its storage, the newest `AUDIT_WINDOW` records.
 *
 * Nothing is written on a call's path: a place keeps its records in a bounded buffer and sends
 * them together after the response, under `waitUntil`, one batch per place at a time (a streamed
 * answer's record comes at its end, so its batch starts there). The query sends the asking
 * isolate's own buffer first, then reads the window.
 */
import type { Gateway } from '../../src/gateway/gateway.js';
import type { AuditEntry, AuditQuery } from '../../src/observe/audit-window.js';
import type { RequestRecord } from '../../src/observe/record.js';
import { AUDIT_WINDOW, auditCall } from '../../src/server/http/admin/audit.js';
import { INTERNAL, INTERNAL_ORIGIN } from './boot.js';

/** The object that keeps the window (a TENANTS object; tenants' own are `tenant:<key>`). */
export const AUDIT_OBJECT = 'manifold:audit';
const PATH = `${INTERNAL}audit`;
/** How long a place gathers records before it sends them: one request per place per interval. */
const GATHER_MS = 500;
/** Rounds one batch runs while records keep coming; then the next request's batch takes over. */
const ROUNDS = 4;
/** A batch mark older than this is from a request that was cut short. */
const STALE_MS = 10_000;
/** Records per stored chunk, within a Durable Object's value size. */
const CHUNK = 100;
const FILTERS = ['tenant', 'server', 'tool', 'verdict'] as const;

export function isAuditRequest(request: Request): boolean {
  return new URL(request.url).pathname === PATH;
}

function stub(tenants: DurableObjectNamespace): DurableObjectStub {
  return tenants.get(tenants.idFromName(AUDIT_OBJECT));
}

/** One place's side: what it audited, gathered and sent to the window. */
export class AuditShipper {
  private buffer: AuditEntry[] = [];
  /** When the batch now gathering began (one per place at a time). */
  private gatheringSince = Number.NEGATIVE_INFINITY;

  constructor(private readonly tenants: DurableObjectNamespace) {}

  /** An observer for `Observers.add`: the record, stamped, into the bounded buffer. */
  readonly observe = (record: RequestRecord): void => {
    if (this.buffer.length >= AUDIT_WINDOW) this.buffer.shift();
    this.buffer.push({ ...record, at: Date.now() });
  };

  /**
   * After a request's response: its records sent in a batch under `waitUntil` once the answer is
   * complete (a stream's end), unless another request's batch is gathering already. Returns the
   * response to send.
   */
  after(response: Response, waitUntil: (p: Promise<unknown>) => void): Response {
    const streamed =
      response.body !== null && /event-stream/.test(response.headers.get('content-type') ?? '');
    if (!streamed) {
      if (this.buffer.length > 0) waitUntil(this.batch());
      return response;
    }
    const { readable, writable } = new TransformStream();
    waitUntil(
      response
        .body!.pipeTo(writable)
        .catch(() => {})
        .then(() => (this.buffer.length > 0 ? this.batch() : undefined)),
    );
    return new Response(readable, response);
  }

  /** Gathers, then sends, while records keep coming (a few rounds at most). */
  private async batch(): Promise<void> {
    const now = Date.now();
    // A batch cut short with its request (waitUntil has a limit) never cleared its mark.
    if (now - this.gatheringSince < STALE_MS) return;
    this.gatheringSince = now;
    try {
      for (let round = 0; round < ROUNDS && this.buffer.length > 0; round++) {
        await new Promise((r) => setTimeout(r, GATHER_MS));
        await this.send();
      }
    } finally {
      this.gatheringSince = Number.NEGATIVE_INFINITY;
    }
  }

  /** Sends what is buffered now, in the calling request's context. */
  async send(): Promise<void> {
    if (this.buffer.length === 0) return;
    const entries = this.buffer;
    this.buffer = [];
    await stub(this.tenants)
      .fetch(`${INTERNAL_ORIGIN}${PATH}`, { method: 'POST', body: JSON.stringify({ entries }) })
      .then((r) => r.body?.cancel())
      .catch(() => {
        // The window's object is away: these records stay in the log's audit lines only.
      });
  }

  /**
   * GET /admin/audit for an admin (the caller checked): the query's checks as the core's route
   * makes them, this place's own records sent, then the window's answer.
   */
  async query(url: URL): Promise<Response> {
    const limitText = url.searchParams.get('limit');
    const limit = limitText === null ? 100 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_WINDOW) {
      return Response.json({ error: `limit must be an integer from 1 to ${AUDIT_WINDOW}` }, { status: 400 });
    }
    await this.send();
    const q = new URLSearchParams({ limit: String(limit) });
    for (const f of FILTERS) {
      const v = url.searchParams.get(f);
      if (v !== null) q.set(f, v);
    }
    return stub(this.tenants).fetch(`${INTERNAL_ORIGIN}${PATH}?${q}`);
  }
}

/** What the window's object needs of its storage. */
interface AuditStorage {
  get<T>(key: string): Promise<T | undefined>;
  put(key: string, value: unknown): Promise<void>;
  delete(keys: string[]): Promise<number>;
  list<T>(options: { prefix: string }): Promise<Map<string, T>>;
}

/** The window's object: chunks of records in its storage, the newest `AUDIT_WINDOW` kept. */
export class AuditRing {
  /** Oldest chunk first, as stored; read once, then kept in step with every write. */
  private chunks: [string, AuditEntry[]][] | undefined;
  private seq = 0;

  constructor(private readonly storage: AuditStorage) {}

  private async load(): Promise<[string, AuditEntry[]][]> {
    if (!this.chunks) {
      const stored = await this.storage.list<AuditEntry[]>({ prefix: 'audit:' });
      this.chunks = [...stored.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
      const last = this.chunks.at(-1)?.[0];
      this.seq = last ? Number(last.slice('audit:'.length)) : 0;
    }
    return this.chunks;
  }

  async answer(request: Request): Promise<Response> {
    if (request.method === 'POST') {
      const { entries } = (await request.json()) as { entries: AuditEntry[] };
      await this.append(Array.isArray(entries) ? entries.slice(-AUDIT_WINDOW) : []);
      return Response.json({ ok: true });
    }
    const params = new URL(request.url).searchParams;
    const q: AuditQuery = { limit: Number(params.get('limit') ?? 100) };
    for (const f of FILTERS) {
      const v = params.get(f);
      if (v !== null) q[f] = v;
    }
    return Response.json({ calls: (await this.query(q)).map(auditCall) });
  }

  private async append(entries: AuditEntry[]): Promise<void> {
    const chunks = await this.load();
    for (let i = 0; i < entries.length; i += CHUNK) {
      const key = `audit:${String(++this.seq).padStart(12, '0')}`;
      const chunk = entries.slice(i, i + CHUNK);
      await this.storage.put(key, chunk);
      chunks.push([key, chunk]);
    }
    let total = chunks.reduce((n, [, c]) => n + c.length, 0);
    const gone: string[] = [];
    while (chunks.length > 0 && total - chunks[0]![1].length >= AUDIT_WINDOW) {
      const [key, c] = chunks.shift()!;
      total -= c.length;
      gone.push(key);
    }
    if (gone.length > 0) await this.storage.delete(gone);
  }

  /** Newest first, as the core's window answers (observe/audit-window.ts). */
  private async query(q: AuditQuery): Promise<AuditEntry[]> {
    const all = (await this.load()).flatMap(([, c]) => c).sort((a, b) => b.at - a.at);
    const out: AuditEntry[] = [];
    for (const e of all) {
      if (out.length >= q.limit) break;
      if (q.tenant !== undefined && e.tenant !== q.tenant) continue;
      if (q.server !== undefined && e.server !== q.server) continue;
      if (q.tool !== undefined && e.target !== q.tool) continue;
      if (q.verdict !== undefined && e.verdict !== q.verdict) continue;
      out.push(e);
    }
    return out;
  }
}

/** A place's shipper, observing its gateway; none when the audit query is off (no status page). */
export function auditShipper(gateway: Gateway, tenants: DurableObjectNamespace): AuditShipper | undefined {
  if (gateway.config.gateway.statusPath === false) return undefined;
  const shipper = new AuditShipper(tenants);
  gateway.observers.add(shipper.observe);
  return shipper;
}
