/**
 * Per-server state that outlives a process: who the server is, its catalog as last listed (a
 * cache), and the baseline of fingerprints trusted at first listing (a trust anchor, not a cache).
 *
 * The baseline is written once, by `createBaseline` (trust on first use), and after that only by
 * `retrust`. Nothing else can overwrite it, by construction: the write is guarded in SQL by
 * `baseline IS NULL`, so even two gateways racing on a fresh file record exactly one baseline.
 *
 * Secrets are never written: the identity holds no env, headers or cwd, and `${VAR}` values are
 * redacted from the URL and the command line (see `identityOf`).
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import { parseRow, type RawRow } from './rows.js';
import { migrate, readMeta } from './schema.js';
import type { SqlExec, SqlValue } from './sql.js';

/** The annotations policy reads. Recorded so that a later loosening of a hint is drift too. */
export interface ToolHints {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  openWorldHint?: boolean;
}

/** Upstream tool name -> what was trusted. Structurally the same as src/guards/drift/verdict.ts. */
export type Baseline = Record<string, { fingerprint: string; hints: ToolHints; tool: Tool }>;

/** Which server a row describes. A row only serves a configured server with the same identity. */
export interface ServerIdentity {
  name: string;
  /** The transport kind: stdio, streamable-http or sse. */
  transport: string;
  /** For HTTP: scheme, host and path (no userinfo, query or fragment). For stdio: JSON of [command, ...args]. */
  target: string;
}

export interface ServerRow {
  /**
   * As stored. When it differs from the configured server's (`sameIdentity`), the config now
   * points somewhere else: the caller must not use this row's baseline for it, and the server
   * stays refused until `retrust`. An unreadable identity reads as empty strings, which never match.
   */
  identity: ServerIdentity;
  /** Absent until listed, or when the stored JSON no longer parses: then the server is listed afresh. */
  catalog?: Tool[];
  catalogAt?: number;
  /** Absent until trusted. */
  baseline?: Baseline;
  trustedAt?: number;
  /**
   * Set when a baseline is stored but no longer parses. Unlike the catalog it is NOT treated as
   * absent: that would silently re-trust whatever the upstream lists next (trust on first use
   * again), which is exactly what a baseline exists to prevent. The caller refuses the server's
   * tools until an explicit `retrust`; `createBaseline` keeps returning false meanwhile.
   */
  baselineUnreadable?: true;
  createdAt: number;
}

/**
 * Promise-returning, so that a networked database (Postgres, deploy/node/store/postgres/store.ts) sits
 * behind the same seam as the synchronous SQLite file and Durable Object: whichever rule needs the
 * database's own answer (one baseline across instances, a claim granted once) asks it, never a
 * mirror. Nothing on the tools/call path calls the store unless a feature needs it (approvals).
 */
export interface StateStore {
  get(name: string): Promise<ServerRow | undefined>;
  /**
   * Records the tools as last listed, creating the row if missing. Resolves false, touching
   * nothing, when the row belongs to a different identity.
   */
  saveCatalog(identity: ServerIdentity, tools: Tool[], now: number): Promise<boolean>;
  /**
   * Trust on first use: records the baseline if none is stored. Resolves false, touching nothing,
   * when one already exists (even an unreadable one) or the row belongs to a different identity.
   */
  createBaseline(identity: ServerIdentity, baseline: Baseline, now: number): Promise<boolean>;
  /**
   * The only rewrite of a baseline, for an operator's explicit re-trust: sets identity and
   * baseline, drops a catalog cached under another identity, and bumps the trust epoch.
   */
  retrust(identity: ServerIdentity, baseline: Baseline, now: number): Promise<void>;
  /** Bumped by every `retrust`, in any process sharing the store: one cheap value to poll. */
  trustEpoch(): Promise<number>;
  /**
   * Claims a single-use key (an approval, #14) until `expiresAt`: true for the first claim, false
   * for every later one, in any process sharing the store. Expired claims are swept as it goes.
   */
  claim(key: string, expiresAt: number, now: number): Promise<boolean>;
  /**
   * Code mode (#50): the journal of a run paused for input (src/code/journal.ts), kept until
   * `expiresAt` under a key made of the principal's key and the run's sealed id.
   */
  saveRun(key: string, journal: string, expiresAt: number, now: number): Promise<void>;
  /** A run's journal, or undefined when there is none (or it expired). */
  loadRun(key: string, now: number): Promise<string | undefined>;
  /**
   * Calls `listener` whenever another process may have re-trusted, where the store can push that
   * (Postgres LISTEN/NOTIFY). Optional and only a speed-up: the trust epoch poll stays the rule.
   */
  watchTrust?(listener: () => void): void;
  close?(): void | Promise<void>;
}

const REDACTED = '[secret]';

/**
 * The identity to store for a configured server. Pass the config's interpolated `secrets`
 * (ConfigResult.secrets) everywhere identities are made, the gateway and the CLI alike: a
 * `${VAR}` value in a URL or an argument is replaced by a placeholder, so it is never written and
 * rotating it does not look like a different server.
 */
export function identityOf(server: ServerConfig, secrets: readonly string[] = []): ServerIdentity {
  // Longest first, so a secret containing another is redacted whole.
  const ordered = secrets.filter((s) => s !== '').sort((a, b) => b.length - a.length);
  const redact = (text: string) => ordered.reduce((t, s) => t.split(s).join(REDACTED), text);
  if (server.type === 'stdio') {
    return {
      name: server.name,
      transport: server.type,
      target: JSON.stringify([server.command ?? '', ...server.args].map(redact)),
    };
  }
  return { name: server.name, transport: server.type, target: urlTarget(redact(server.url ?? '')) };
}

/** Userinfo and query often carry literal credentials; the rest says where the server is. */
function urlTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return url.split(/[?#]/)[0] ?? '';
  }
}

export function sameIdentity(a: ServerIdentity, b: ServerIdentity): boolean {
  return a.name === b.name && a.transport === b.transport && a.target === b.target;
}

const COLUMNS = 'name, transport, target, catalog, catalog_at, baseline, trusted_at, created_at';
const SAME_IDENTITY = 'servers.transport = excluded.transport AND servers.target = excluded.target';

// Each write is one UPSERT whose WHERE is the rule itself; RETURNING says whether it applied, which
// a Durable Object reports as reliably as better-sqlite3 (unlike a separate changes() query).
const SAVE_CATALOG = `INSERT INTO servers (name, transport, target, catalog, catalog_at, created_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (name) DO UPDATE SET catalog = excluded.catalog, catalog_at = excluded.catalog_at
  WHERE ${SAME_IDENTITY}
  RETURNING name`;
const CREATE_BASELINE = `INSERT INTO servers (name, transport, target, baseline, trusted_at, created_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (name) DO UPDATE SET baseline = excluded.baseline, trusted_at = excluded.trusted_at
  WHERE servers.baseline IS NULL AND ${SAME_IDENTITY}
  RETURNING name`;
// The right-hand sides all see the old row, so the CASEs compare the identity before the rewrite.
const RETRUST = `INSERT INTO servers (name, transport, target, baseline, trusted_at, created_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (name) DO UPDATE SET
    catalog = CASE WHEN ${SAME_IDENTITY} THEN servers.catalog ELSE NULL END,
    catalog_at = CASE WHEN ${SAME_IDENTITY} THEN servers.catalog_at ELSE NULL END,
    transport = excluded.transport,
    target = excluded.target,
    baseline = excluded.baseline,
    trusted_at = excluded.trusted_at`;
const BUMP_EPOCH = `INSERT INTO meta (key, value) VALUES ('trust_epoch', 1)
  ON CONFLICT (key) DO UPDATE SET value = value + 1`;

const CLAIM = `INSERT INTO claims (key, expires_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING RETURNING key`;
const SWEEP_CLAIMS = 'DELETE FROM claims WHERE expires_at < ?';
/** Sweep expired claims once per this many claims (a sweep is one indexed DELETE). */
const SWEEP_EVERY = 64;

const SAVE_RUN = `INSERT INTO code_runs (key, journal, expires_at) VALUES (?, ?, ?)
  ON CONFLICT (key) DO UPDATE SET journal = excluded.journal, expires_at = excluded.expires_at`;
const LOAD_RUN = 'SELECT journal FROM code_runs WHERE key = ? AND expires_at >= ?';
const SWEEP_RUNS = 'DELETE FROM code_runs WHERE expires_at < ?';

/** The store over any `SqlExec`: a SQLite file on Node, a Durable Object on Workers. */
export class SqlStateStore implements StateStore {
  constructor(private readonly sql: SqlExec) {
    migrate(sql);
  }

  async get(name: string): Promise<ServerRow | undefined> {
    const raw = this.sql.exec<RawRow>(`SELECT ${COLUMNS} FROM servers WHERE name = ?`, name)[0];
    return raw ? parseRow(raw) : undefined;
  }

  async saveCatalog(identity: ServerIdentity, tools: Tool[], now: number): Promise<boolean> {
    const { name, transport, target } = identity;
    return this.write(SAVE_CATALOG, name, transport, target, JSON.stringify(tools), now, now);
  }

  async createBaseline(identity: ServerIdentity, baseline: Baseline, now: number): Promise<boolean> {
    const { name, transport, target } = identity;
    return this.write(CREATE_BASELINE, name, transport, target, JSON.stringify(baseline), now, now);
  }

  async retrust(identity: ServerIdentity, baseline: Baseline, now: number): Promise<void> {
    const { name, transport, target } = identity;
    const text = JSON.stringify(baseline);
    this.sql.transaction(() => {
      this.sql.exec(RETRUST, name, transport, target, text, now, now);
      this.sql.exec(BUMP_EPOCH);
    });
  }

  async trustEpoch(): Promise<number> {
    return readMeta(this.sql, 'trust_epoch') ?? 0;
  }

  private claims = 0;

  async claim(key: string, expiresAt: number, now: number): Promise<boolean> {
    if (this.claims++ % SWEEP_EVERY === 0) this.sql.exec(SWEEP_CLAIMS, now);
    // A key still on file after its expiry counts as used: a claim is never granted twice.
    return this.write(CLAIM, key, expiresAt);
  }

  private runs = 0;

  async saveRun(key: string, journal: string, expiresAt: number, now: number): Promise<void> {
    if (this.runs++ % SWEEP_EVERY === 0) this.sql.exec(SWEEP_RUNS, now);
    this.sql.exec(SAVE_RUN, key, journal, expiresAt);
  }

  async loadRun(key: string, now: number): Promise<string | undefined> {
    const row = this.sql.exec<{ journal: unknown }>(LOAD_RUN, key, now)[0];
    return typeof row?.journal === 'string' ? row.journal : undefined;
  }

  close(): void {
    this.sql.close?.();
  }

  private write(query: string, ...bindings: SqlValue[]): boolean {
    return this.sql.exec(query, ...bindings).length > 0;
  }
}

/**
 * The same rules without SQL, for tests and for runs without a configured store. Rows are kept
 * as the same JSON text a database holds, so callers can never share objects with the store and
 * both stores read through one parser.
 */
export class MemoryStateStore implements StateStore {
  private readonly rows = new Map<string, RawRow>();
  private epoch = 0;

  async get(name: string): Promise<ServerRow | undefined> {
    const raw = this.rows.get(name);
    return raw ? parseRow(raw) : undefined;
  }

  async saveCatalog(identity: ServerIdentity, tools: Tool[], now: number): Promise<boolean> {
    const row = this.rows.get(identity.name) ?? this.fresh(identity, now);
    if (!this.matches(row, identity)) return false;
    row.catalog = JSON.stringify(tools);
    row.catalog_at = now;
    return true;
  }

  async createBaseline(identity: ServerIdentity, baseline: Baseline, now: number): Promise<boolean> {
    const row = this.rows.get(identity.name) ?? this.fresh(identity, now);
    if (row.baseline !== null || !this.matches(row, identity)) return false;
    row.baseline = JSON.stringify(baseline);
    row.trusted_at = now;
    return true;
  }

  async retrust(identity: ServerIdentity, baseline: Baseline, now: number): Promise<void> {
    const row = this.rows.get(identity.name) ?? this.fresh(identity, now);
    if (!this.matches(row, identity)) {
      row.catalog = null;
      row.catalog_at = null;
    }
    row.transport = identity.transport;
    row.target = identity.target;
    row.baseline = JSON.stringify(baseline);
    row.trusted_at = now;
    this.epoch += 1;
  }

  async trustEpoch(): Promise<number> {
    return this.epoch;
  }

  private readonly claimed = new Map<string, number>();

  async claim(key: string, expiresAt: number, now: number): Promise<boolean> {
    if (this.claimed.size >= 1024) {
      for (const [k, at] of this.claimed) if (at < now) this.claimed.delete(k);
    }
    if (this.claimed.has(key)) return false;
    this.claimed.set(key, expiresAt);
    return true;
  }

  private readonly runs = new Map<string, { journal: string; expiresAt: number }>();

  async saveRun(key: string, journal: string, expiresAt: number, now: number): Promise<void> {
    if (this.runs.size >= 1024) {
      for (const [k, r] of this.runs) if (r.expiresAt < now) this.runs.delete(k);
    }
    this.runs.set(key, { journal, expiresAt });
  }

  async loadRun(key: string, now: number): Promise<string | undefined> {
    const run = this.runs.get(key);
    return run && run.expiresAt >= now ? run.journal : undefined;
  }

  close(): void {}

  private fresh(identity: ServerIdentity, now: number): RawRow {
    const row: RawRow = {
      name: identity.name,
      transport: identity.transport,
      target: identity.target,
      catalog: null,
      catalog_at: null,
      baseline: null,
      trusted_at: null,
      created_at: now,
    };
    this.rows.set(identity.name, row);
    return row;
  }

  private matches(row: RawRow, identity: ServerIdentity): boolean {
    return row.transport === identity.transport && row.target === identity.target;
  }
}
