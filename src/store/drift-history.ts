/**
 * Drift history (#52): per tool, what drift decided and when, for the console and the admin API.
 * A tool held back (quarantined: changed since trusted; withheld: never trusted) and a change
 * accepted by an operator are each one event, kept in the store beside the baseline, so every
 * instance sharing it shows the same history. It holds names, fingerprints and who accepted,
 * never a tool's text: the drifted text stays withheld from everyone but the review.
 *
 * An event is written only when it says something new (`repeats`): a recheck that holds the same
 * definition back again, or an instance that holds back what was just accepted elsewhere, is
 * skipped in SQL, so instances re-verifying at every poll do not repeat themselves. Each tool keeps
 * its newest `DRIFT_HISTORY_PER_TOOL` events.
 */

export type DriftEventKind = 'quarantined' | 'withheld' | 'accepted';

export interface DriftRecord {
  server: string;
  /** The upstream's own name of the item (a tool; `prompt:NAME` and `template:URI` alike). */
  tool: string;
  kind: DriftEventKind;
  /** The definition's fingerprint as listed (held back) or as accepted; '' for an accepted removal. */
  fingerprint: string;
  /** Accepted: the digest of the review that was accepted (admin API), when there was one. */
  digest?: string;
  /** Accepted: who accepted it, where known. */
  by?: string;
  at: number;
}

/** Events kept per tool, the newest. */
export const DRIFT_HISTORY_PER_TOOL = 20;

const KINDS: readonly DriftEventKind[] = ['quarantined', 'withheld', 'accepted'];

/** One row as stored; undefined when any column is not what a Manifold writes. */
export function parseDriftRecord(row: Record<string, unknown>): DriftRecord | undefined {
  const kind = KINDS.find((k) => k === row.kind);
  const { server, tool, fingerprint, digest, accepted_by: by, decided_at: at } = row;
  if (!kind || typeof server !== 'string' || typeof tool !== 'string') return undefined;
  if (typeof fingerprint !== 'string' || typeof at !== 'number') return undefined;
  return {
    server,
    tool,
    kind,
    fingerprint,
    ...(typeof digest === 'string' ? { digest } : {}),
    ...(typeof by === 'string' ? { by } : {}),
    at,
  };
}

/** The queries, for tables prefixed `p` (Postgres: `manifold_`); `?` bindings. */
export function driftQueries(p: string) {
  const newest = `SELECT kind, fingerprint FROM ${p}drift_events WHERE server = ? AND tool = ?
    ORDER BY decided_at DESC LIMIT 1`;
  return {
    // `WHERE NOT EXISTS`: nothing new (`repeats`) adds nothing.
    record: `INSERT INTO ${p}drift_events (server, tool, kind, fingerprint, digest, accepted_by, decided_at)
  SELECT ?, ?, ?, ?, ?, ?, ?
  WHERE NOT EXISTS (SELECT 1 FROM (${newest}) AS last_event
    WHERE last_event.fingerprint = ? AND (last_event.kind = ? OR ? <> 'accepted'))`,
    // Everything older than the tool's kept events; nothing while it has fewer.
    trim: `DELETE FROM ${p}drift_events WHERE server = ? AND tool = ? AND decided_at < (
    SELECT decided_at FROM ${p}drift_events WHERE server = ? AND tool = ? ORDER BY decided_at DESC LIMIT 1 OFFSET ${DRIFT_HISTORY_PER_TOOL - 1})`,
    ofServer: `SELECT server, tool, kind, fingerprint, digest, accepted_by, decided_at FROM ${p}drift_events
  WHERE server = ? ORDER BY decided_at DESC LIMIT ?`,
    ofTool: `SELECT server, tool, kind, fingerprint, digest, accepted_by, decided_at FROM ${p}drift_events
  WHERE server = ? AND tool = ? ORDER BY decided_at DESC LIMIT ?`,
  };
}

/**
 * Whether `e` says nothing new after `last`, the tool's event before it: the same definition held
 * back again (a recheck, another instance), held back after it was accepted (an instance that has
 * not yet learnt of the accept), or accepted again.
 */
export function repeats(e: DriftRecord, last: DriftRecord | undefined): boolean {
  return (
    last !== undefined &&
    last.fingerprint === e.fingerprint &&
    (last.kind === e.kind || e.kind !== 'accepted')
  );
}

/**
 * A history as shown, newest first, without the events that repeat (`repeats`) the tool's next
 * older one. `record` skips them in SQL, but two instances writing at the same moment can both
 * pass that check on Postgres, where each statement reads the table as it was when it began.
 */
export function withoutRepeats(newestFirst: readonly DriftRecord[]): DriftRecord[] {
  return newestFirst.filter(
    (e, i) =>
      !repeats(
        e,
        newestFirst.slice(i + 1).find((o) => o.tool === e.tool),
      ),
  );
}

/** The bindings of `record`, in its order. */
export function recordValues(e: DriftRecord): (string | number | null)[] {
  return [
    e.server,
    e.tool,
    e.kind,
    e.fingerprint,
    e.digest ?? null,
    e.by ?? null,
    e.at,
    e.server,
    e.tool,
    e.fingerprint,
    e.kind,
    e.kind,
  ];
}

/** The same rules in memory. */
export class MemoryDriftHistory {
  private readonly rows: DriftRecord[] = [];

  record(e: DriftRecord): void {
    const mine = this.rows.filter((r) => r.server === e.server && r.tool === e.tool);
    const last = mine.reduce<DriftRecord | undefined>((a, r) => (!a || r.at >= a.at ? r : a), undefined);
    if (repeats(e, last)) return;
    this.rows.push({ ...e });
    if (mine.length + 1 > DRIFT_HISTORY_PER_TOOL) {
      const oldest = mine.reduce((a, r) => (r.at < a.at ? r : a));
      this.rows.splice(this.rows.indexOf(oldest), 1);
    }
  }

  list(server: string, tool: string | undefined, limit: number): DriftRecord[] {
    return this.rows
      .filter((r) => r.server === server && (tool === undefined || r.tool === tool))
      .sort((a, b) => b.at - a.at)
      .slice(0, limit)
      .map((r) => ({ ...r }));
  }
}
