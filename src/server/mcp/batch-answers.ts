import { byteLength } from '../../guards/result-cap.js';

/**
 * The answers to one 2025-03-26 JSON-RPC batch, within a byte budget (#49.2): the whole answer
 * never holds more than `maxBytes`, whatever the batch asks for. Each request gets a slot in
 * order, and each slot reserves, up front, the bytes of the error that would answer it instead.
 * So every request can always be answered (with its result if that fits in place of its
 * reservation, else with its error), and the total stays in budget.
 *
 * @example
 * const answers = new BatchAnswers(4 * 1024 * 1024);
 * if (!answers.reserve(refusal.length)) ... // even the errors do not fit: refuse the batch
 * if (!answers.offer(0, result)) answers.refuse(0, refusal);
 * const body = answers.body();
 */
export class BatchAnswers {
  private readonly texts: (string | undefined)[] = [];
  private readonly reserved: number[] = [];
  /** Bytes of the answers so far, plus those reserved for the slots not answered yet. */
  private held = 0;

  constructor(readonly maxBytes: number) {}

  /**
   * A slot for the next request, with the bytes of its error answer set aside; false (and no
   * slot) when even that would take the answer past its budget.
   */
  reserve(errorBytes: number): boolean {
    const comma = this.reserved.length > 0 ? 1 : 0;
    if (this.held + 2 + comma + errorBytes > this.maxBytes) return false;
    this.held += comma + errorBytes;
    this.reserved.push(errorBytes);
    this.texts.push(undefined);
    return true;
  }

  /** Answers `slot` with `text` when it fits in place of the slot's reservation; false if not. */
  offer(slot: number, text: string): boolean {
    const bytes = byteLength(text);
    const room = this.maxBytes - 2 - this.held + (this.reserved[slot] ?? 0);
    if (bytes > room) return false;
    this.settle(slot, text, bytes);
    return true;
  }

  /** Answers `slot` with its error, which must be no longer than what the slot reserved. */
  refuse(slot: number, error: string): void {
    this.settle(slot, error, byteLength(error));
  }

  /** The JSON array of every answer, in order (all slots must have been answered). */
  body(): string {
    return `[${this.texts.join(',')}]`;
  }

  get size(): number {
    return this.texts.length;
  }

  private settle(slot: number, text: string, bytes: number): void {
    if (this.texts[slot] !== undefined) throw new Error(`batch slot ${slot} is already answered`);
    this.held += bytes - (this.reserved[slot] ?? 0);
    this.reserved[slot] = bytes;
    this.texts[slot] = text;
  }
}
