/**
 * The recent audited requests for the admin API's audit query (#52): the last `capacity` records
 * this instance wrote an audit line for, newest first, filterable by tenant, server, tool and
 * verdict. Bounded whatever the traffic (one fixed ring); what it holds is what the audit line
 * says, never arguments or results. The full trail is the log: this is the recent view of it.
 */
import type { RequestRecord } from './record.js';

export interface AuditEntry extends RequestRecord {
  /** When it was recorded (ms since the epoch). */
  at: number;
}

export interface AuditQuery {
  tenant?: string;
  server?: string;
  tool?: string;
  verdict?: string;
  limit: number;
}

export class AuditWindow {
  /** Each record as it was observed, and when: copied into an entry only when a query returns it. */
  private readonly ring: ({ at: number; record: RequestRecord } | undefined)[];
  private next = 0;

  constructor(
    capacity: number,
    private readonly now: () => number,
  ) {
    this.ring = new Array(capacity);
  }

  /** An observer for `Observers.add`. */
  readonly observe = (record: RequestRecord): void => {
    this.ring[this.next] = { at: this.now(), record };
    this.next = (this.next + 1) % this.ring.length;
  };

  query(q: AuditQuery): AuditEntry[] {
    const out: AuditEntry[] = [];
    for (let i = 1; i <= this.ring.length && out.length < q.limit; i++) {
      const kept = this.ring[(this.next - i + this.ring.length) % this.ring.length];
      if (!kept) break;
      const e = kept.record;
      if (q.tenant !== undefined && e.tenant !== q.tenant) continue;
      if (q.server !== undefined && e.server !== q.server) continue;
      if (q.tool !== undefined && e.target !== q.tool) continue;
      if (q.verdict !== undefined && e.verdict !== q.verdict) continue;
      out.push({ at: kept.at, ...e });
    }
    return out;
  }
}
