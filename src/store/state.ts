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
import { ManifoldError } from '../errors.js';
import { type ApprovalStore, MemoryApprovalStore, SqlApprovalStore } from './approvals.js';
import {
  type DriftRecord,
  driftQueries,
  MemoryDriftHistory,
  parseDriftRecord,
  recordValues,
  withoutRepeats,
} from './drift-history.js';
import { parseRow, type RawRow } from './rows.js';
import type { SqlValue, Statement, StateSql } from './sql.js';
import { MemoryServerStore, type ServerStore, SqlServerStore } from './stored-servers.js';
import { MemoryTokenStore, SqlTokenStore, type TokenStore } from './tokens.js';

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
   * Drift history (#52, drift-history.ts): adds one event, unless the tool's newest event is
   * already this kind with this fingerprint; keeps each tool's newest.
   */
  recordDrift(event: DriftRecord): Promise<void>;
  /** A server's drift events (one tool's, with `tool`), the newest first. */
  driftHistory(server: string, tool: string | undefined, limit: number): Promise<DriftRecord[]>;
  /**
   * Calls `listener` whenever another process may have re-trusted, where the store can push that
   * (Postgres LISTEN/NOTIFY). Optional and only a speed-up: the trust epoch poll stays the rule.
   */
  watchTrust?(listener: () => void): void;
  /** The approvals queue (#52), in the same store. Absent: the gateway keeps one in memory. */
  readonly approvals?: ApprovalStore;
  /** Servers added through the admin API (#52), in the same store. Absent: kept in memory. */
  readonly storedServers?: ServerStore;
  /** Tokens seen and revoked (#52), in the same store. Absent: kept in memory. */
  readonly tokens?: TokenStore;
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

function queries(p: string) {
  const sameIdentity = `${p}servers.transport = excluded.transport AND ${p}servers.target = excluded.target`;
  // Each write is one UPSERT whose WHERE is the rule itself, so the database decides what "first"
  // means across processes and instances; RETURNING says whether it applied, which a Durable
  // Object reports as reliably as better-sqlite3 and Postgres (unlike a separate changes() query).
  return {
    get: `SELECT ${COLUMNS} FROM ${p}servers WHERE name = ?`,
    saveCatalog: `INSERT INTO ${p}servers (name, transport, target, catalog, catalog_at, created_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (name) DO UPDATE SET catalog = excluded.catalog, catalog_at = excluded.catalog_at
  WHERE ${sameIdentity}
  RETURNING name`,
    // Two instances starting at once on a fresh database record one baseline: the second's upsert
    // finds it set.
    createBaseline: `INSERT INTO ${p}servers (name, transport, target, baseline, trusted_at, created_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (name) DO UPDATE SET baseline = excluded.baseline, trusted_at = excluded.trusted_at
  WHERE ${p}servers.baseline IS NULL AND ${sameIdentity}
  RETURNING name`,
    // The right-hand sides all see the old row, so the CASEs compare the identity before the rewrite.
    retrust: `INSERT INTO ${p}servers (name, transport, target, baseline, trusted_at, created_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (name) DO UPDATE SET
    catalog = CASE WHEN ${sameIdentity} THEN ${p}servers.catalog ELSE NULL END,
    catalog_at = CASE WHEN ${sameIdentity} THEN ${p}servers.catalog_at ELSE NULL END,
    transport = excluded.transport,
    target = excluded.target,
    baseline = excluded.baseline,
    trusted_at = excluded.trusted_at`,
    bumpEpoch: `INSERT INTO ${p}meta (key, value) VALUES ('trust_epoch', 1)
  ON CONFLICT (key) DO UPDATE SET value = ${p}meta.value + 1`,
    trustEpoch: `SELECT value FROM ${p}meta WHERE key = 'trust_epoch'`,
    // A claim is an INSERT that does nothing on conflict: granted once, whichever process asks.
    claim: `INSERT INTO ${p}claims (key, expires_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING RETURNING key`,
    sweepClaims: `DELETE FROM ${p}claims WHERE expires_at < ?`,
    // The journal of a paused code-mode run (#50), keyed by principal and run id.
    saveRun: `INSERT INTO ${p}code_runs (key, journal, expires_at) VALUES (?, ?, ?)
  ON CONFLICT (key) DO UPDATE SET journal = excluded.journal, expires_at = excluded.expires_at`,
    loadRun: `SELECT journal FROM ${p}code_runs WHERE key = ? AND expires_at >= ?`,
    sweepRuns: `DELETE FROM ${p}code_runs WHERE expires_at < ?`,
  };
}

/** Sweep expired claims once per this many claims (a sweep is one indexed DELETE). */
const SWEEP_EVERY = 64;

/**
 * The store over SQL, one set of queries for every database: a SQLite file on Node, a Durable
 * Object on Workers (`execSql`), Postgres (deploy/node/store/postgres/store.ts). The schema is
 * migrated by whoever opens the database.
 */
export class SqlStateStore implements StateStore {
  private readonly q: ReturnType<typeof queries>;
  private readonly drift: ReturnType<typeof driftQueries>;
  private claims = 0;
  readonly approvals: ApprovalStore;
  readonly storedServers: ServerStore;
  readonly tokens: TokenStore;

  constructor(private readonly sql: StateSql) {
    this.q = queries(sql.prefix ?? '');
    this.drift = driftQueries(sql.prefix ?? '');
    // The stores of #52, over the same database and the same queries.
    this.approvals = new SqlApprovalStore(sql);
    this.storedServers = new SqlServerStore(sql);
    this.tokens = new SqlTokenStore(sql);
  }

  async get(name: string): Promise<ServerRow | undefined> {
    const raw = (await this.sql.query(this.q.get, [name]))[0];
    return raw ? parseRow(raw) : undefined;
  }

  saveCatalog(identity: ServerIdentity, tools: Tool[], now: number): Promise<boolean> {
    const { name, transport, target } = identity;
    return this.write(this.q.saveCatalog, [name, transport, target, JSON.stringify(tools), now, now]);
  }

  createBaseline(identity: ServerIdentity, baseline: Baseline, now: number): Promise<boolean> {
    const { name, transport, target } = identity;
    return this.write(this.q.createBaseline, [name, transport, target, JSON.stringify(baseline), now, now]);
  }

  async retrust(identity: ServerIdentity, baseline: Baseline, now: number): Promise<void> {
    const { name, transport, target } = identity;
    const statements: Statement[] = [
      [this.q.retrust, [name, transport, target, JSON.stringify(baseline), now, now]],
      [this.q.bumpEpoch, []],
    ];
    if (this.sql.afterRetrust) statements.push(this.sql.afterRetrust);
    await this.sql.atomically(statements);
  }

  async trustEpoch(): Promise<number> {
    const value = (await this.sql.query(this.q.trustEpoch, []))[0]?.value ?? 0;
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      throw new ManifoldError('ERR_CONFIG', 'the state store has an unreadable trust epoch');
    }
    return value;
  }

  async claim(key: string, expiresAt: number, now: number): Promise<boolean> {
    if (this.claims++ % SWEEP_EVERY === 0) await this.sql.query(this.q.sweepClaims, [now]);
    // A key still on file after its expiry counts as used: a claim is never granted twice.
    return this.write(this.q.claim, [key, expiresAt]);
  }

  private runs = 0;

  async saveRun(key: string, journal: string, expiresAt: number, now: number): Promise<void> {
    if (this.runs++ % SWEEP_EVERY === 0) await this.sql.query(this.q.sweepRuns, [now]);
    await this.sql.query(this.q.saveRun, [key, journal, expiresAt]);
  }

  async loadRun(key: string, now: number): Promise<string | undefined> {
    const row = (await this.sql.query(this.q.loadRun, [key, now]))[0];
    return typeof row?.journal === 'string' ? row.journal : undefined;
  }

  async recordDrift(e: DriftRecord): Promise<void> {
    await this.sql.atomically([
      [this.drift.record, recordValues(e)],
      [this.drift.trim, [e.server, e.tool, e.server, e.tool]],
    ]);
  }

  async driftHistory(server: string, tool: string | undefined, limit: number): Promise<DriftRecord[]> {
    const rows =
      tool === undefined
        ? await this.sql.query(this.drift.ofServer, [server, limit])
        : await this.sql.query(this.drift.ofTool, [server, tool, limit]);
    return withoutRepeats(rows.map(parseDriftRecord).filter((r): r is DriftRecord => r !== undefined));
  }

  async close(): Promise<void> {
    await this.sql.close?.();
  }

  private async write(query: string, values: SqlValue[]): Promise<boolean> {
    return (await this.sql.query(query, values)).length > 0;
  }
}

/**
 * The same rules without SQL, for tests and for runs without a configured store. Rows are kept
 * as the same JSON text a database holds, so callers can never share objects with the store and
 * both stores read through one parser.
 */
export class MemoryStateStore implements StateStore {
  readonly approvals: ApprovalStore = new MemoryApprovalStore();
  readonly storedServers: ServerStore = new MemoryServerStore();
  readonly tokens: TokenStore = new MemoryTokenStore();
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

  private readonly history = new MemoryDriftHistory();

  async recordDrift(e: DriftRecord): Promise<void> {
    this.history.record(e);
  }

  async driftHistory(server: string, tool: string | undefined, limit: number): Promise<DriftRecord[]> {
    return this.history.list(server, tool, limit);
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
