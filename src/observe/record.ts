/**
 * What the gateway tells its observers (metrics, the status page's recent calls) about each
 * audited request: the same facts as the audit line, never arguments, tokens or upstream text.
 */
export interface RequestRecord {
  /** `tools/call`, `prompts/get`, `resources/read`, `completion/complete`, a tasks method. */
  method: string;
  tenant: string;
  subject: string;
  /** The configured server that owns the target; null when it was never resolved. */
  server: string | null;
  /** The exposed tool or prompt name, or the URI; null when the request named none. */
  target: string | null;
  verdict: string;
  /** Why a request was refused before it was relayed (an error code), when it was. */
  reason?: string;
  durationMs: number;
  bytesIn: number;
  bytesOut: number;
}

export type RequestObserver = (record: RequestRecord) => void;

/**
 * The gateway's observers. An observer that throws is dropped from that one notification and
 * never breaks the request it observes.
 */
export class Observers {
  private list: RequestObserver[] = [];

  /** Adds an observer; the function returned removes it. */
  add(observer: RequestObserver): () => void {
    this.list = [...this.list, observer];
    return () => {
      this.list = this.list.filter((o) => o !== observer);
    };
  }

  /** Whether anyone listens: a caller skips building the record when nobody does. */
  get active(): boolean {
    return this.list.length > 0;
  }

  /**
   * Builds the record of one audited request and tells every observer, or does nothing at all
   * when nobody listens (the audit paths of tools-call.ts and relay.ts share it).
   */
  report(
    method: string,
    who: { tenant: string; subject: string },
    server: string | null,
    target: string | null,
    verdict: string,
    durationMs: number,
    bytesIn: number,
    bytesOut: number,
    reason?: string,
  ): void {
    if (this.list.length === 0) return;
    const record: RequestRecord = {
      method,
      tenant: who.tenant,
      subject: who.subject,
      server,
      target,
      verdict,
      durationMs,
      bytesIn,
      bytesOut,
    };
    if (reason) record.reason = reason;
    this.request(record);
  }

  request(record: RequestRecord): void {
    for (const o of this.list) {
      try {
        o(record);
      } catch {
        // An observer's bug must not turn into a failed call.
      }
    }
  }
}
