/**
 * W3C Trace Context (`traceparent`, `tracestate`) and W3C Baggage, read from a request and written
 * onto the next hop. MCP 2026-07-28 reserves these three `_meta` keys for them (basic/index,
 * "General fields", "OpenTelemetry trace context"): their values follow the W3C formats.
 *
 * Written here rather than taken from @opentelemetry/core: its Node entry imports `util`, and
 * nothing under src/ may reach for Node (the core runs on Workers too).
 */
import { createTraceState, type SpanContext, type TraceState } from '@opentelemetry/api';
import { HTTP_TOKEN } from './headers.js';

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const HEX2 = /^[0-9a-f]{2}$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/**
 * The parent a `traceparent` names, or undefined when it is not one to continue (the trace then
 * starts anew: W3C Trace Context §4.3). Version 00 is exactly 55 characters; a later version is
 * read by its first four fields, which must end the value or be followed by a dash (§4.3,
 * "Versioning of traceparent"); version ff is invalid. Only the sampled bit of the flags is kept.
 */
export function parseTraceparent(value: unknown, tracestate?: unknown): SpanContext | undefined {
  if (typeof value !== 'string' || value.length < 55) return undefined;
  const version = value.slice(0, 2);
  if (!HEX2.test(version) || version === 'ff') return undefined;
  if (version === '00' ? value.length !== 55 : value.length > 55 && value[55] !== '-') return undefined;
  if (value[2] !== '-' || value[35] !== '-' || value[52] !== '-') return undefined;
  const traceId = value.slice(3, 35);
  const spanId = value.slice(36, 52);
  const flags = value.slice(53, 55);
  if (!HEX32.test(traceId) || traceId === ZERO_TRACE) return undefined;
  if (!HEX16.test(spanId) || spanId === ZERO_SPAN) return undefined;
  if (!HEX2.test(flags)) return undefined;
  const context: SpanContext = {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16) & 1,
    isRemote: true,
  };
  const state = parseTracestate(tracestate);
  if (state) context.traceState = state;
  return context;
}

/** The `traceparent` of a span: always version 00 (the one this code writes). */
export function formatTraceparent(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-0${context.traceFlags & 1}`;
}

/**
 * A `tracestate`, its list members checked and at most 32 kept; one over 512 characters is dropped
 * whole (the API's own parser, which follows §3.3).
 */
export function parseTracestate(value: unknown): TraceState | undefined {
  if (typeof value !== 'string' || value === '') return undefined;
  const state = createTraceState(value);
  return state.serialize() === '' ? undefined : state;
}

/** W3C Baggage §3.3.1: limits a receiver may apply (and this one does). */
const MAX_BAGGAGE_MEMBERS = 64;
const MAX_BAGGAGE_CHARS = 8192;
// baggage-octet: US-ASCII without controls, whitespace, DQUOTE, comma, semicolon and backslash.
const VALUE = /^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*$/;
const PROPERTY = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+(\s*=\s*[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*)?$/;

/**
 * A `baggage` value as it may go on: each list member checked (`key=value`, then `;properties`),
 * malformed ones dropped, at most 64 members and 8192 characters. Undefined when nothing is left.
 */
export function parseBaggage(value: unknown): string | undefined {
  // Far past any limit: not worth reading (a cut member could look valid, so none is cut).
  if (typeof value !== 'string' || value === '' || value.length > MAX_BAGGAGE_CHARS * 8) return undefined;
  const kept: string[] = [];
  let length = 0;
  for (const raw of value.split(',')) {
    if (kept.length === MAX_BAGGAGE_MEMBERS) break;
    const [pair = '', ...props] = raw.split(';').map((s) => s.trim());
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const key = pair.slice(0, eq).trim();
    const val = pair.slice(eq + 1).trim();
    if (!HTTP_TOKEN.test(key) || !VALUE.test(val) || !props.every((p) => PROPERTY.test(p))) continue;
    const member = [`${key}=${val}`, ...props].join(';');
    if (length + member.length + (kept.length > 0 ? 1 : 0) > MAX_BAGGAGE_CHARS) break;
    length += member.length + (kept.length > 0 ? 1 : 0);
    kept.push(member);
  }
  return kept.length > 0 ? kept.join(',') : undefined;
}
