/**
 * Bounds on what upstreams say about their prompts, resources and resource templates, before any
 * of it enters the catalog (SECURITY C6, E4, as tool-bounds.ts does for tools). Upstream text is
 * untrusted: control, bidirectional and zero-width characters are stripped from every string a
 * client or model is shown; descriptions are clipped; only the fields the protocol defines are
 * kept, each bounded; an item that cannot be routed safely (a URI with control characters, one
 * too long) is left out, with a finding.
 */
import type { Prompt, Resource, ResourceTemplate } from '@modelcontextprotocol/sdk/types.js';
import { isObject } from '../lib/json.js';
import { clipText, stripStrings, stripUnsafe, utf8Bytes } from './text.js';

export interface ItemFinding {
  rule: 'unroutable-uri' | 'malformed-item';
  item: string;
}

export interface ItemBoundsOptions {
  maxDescriptionBytes: number;
}

const MAX_TITLE = 256;
const MAX_ARGUMENTS = 64;
const MAX_ARGUMENT_TEXT = 1024;
export const MAX_URI = 2048;
const MAX_META_BYTES = 2048;
const MAX_ICONS = 8;

type Obj = Record<string, unknown>;

function text(v: unknown, max: number): string | undefined {
  return typeof v === 'string' ? clipText(stripUnsafe(v), max).text : undefined;
}

/**
 * JSON extras (`_meta`, `annotations`, `execution`) pass when they serialize to at most 2 KiB,
 * with every string in them (keys too) stripped; larger ones, or anything not an object, are
 * dropped (#13.10).
 */
export function small(v: unknown): Obj | undefined {
  if (!isObject(v)) return undefined;
  try {
    if (utf8Bytes(JSON.stringify(v)) > MAX_META_BYTES) return undefined;
  } catch {
    return undefined;
  }
  return stripStrings(v) as Obj;
}

/** At most 8 icons, each with only the fields the protocol defines (schema: Icon), bounded. */
export function icons(v: unknown): unknown[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out: Obj[] = [];
  for (const i of v) {
    if (out.length >= MAX_ICONS) break;
    if (!isObject(i) || typeof i.src !== 'string' || i.src.length > MAX_URI || !routableUri(i.src)) continue;
    const icon: Obj = { src: i.src };
    assign(icon, 'mimeType', mimeType(i.mimeType));
    if (Array.isArray(i.sizes)) {
      const sizes = i.sizes
        .filter((x) => typeof x === 'string' && /^(?:\d{1,5}x\d{1,5}|any)$/.test(x))
        .slice(0, 8);
      if (sizes.length > 0) icon.sizes = sizes;
    }
    if (i.theme === 'light' || i.theme === 'dark') icon.theme = i.theme;
    out.push(icon);
  }
  return out.length > 0 ? out : undefined;
}

/** A URI the gateway can route and show: a bounded string without controls or whitespace. */
export function routableUri(uri: unknown): uri is string {
  if (typeof uri !== 'string' || uri.length === 0 || uri.length > MAX_URI) return false;
  for (let i = 0; i < uri.length; i++) {
    const c = uri.charCodeAt(i);
    // Controls, DEL and whitespace never belong in a URI (RFC 3986 §2).
    if (c <= 0x20 || c === 0x7f) return false;
  }
  return stripUnsafe(uri) === uri;
}

/** A MIME type as `type/subtype`, bounded, or undefined. */
function mimeType(v: unknown): string | undefined {
  return typeof v === 'string' && v.length <= 128 && /^[\w.+-]+\/[\w.+-]+$/.test(v) ? v : undefined;
}

function assign(out: Obj, key: string, value: unknown): void {
  if (value !== undefined) out[key] = value;
}

export function boundPrompt(prompt: Prompt, o: ItemBoundsOptions): Prompt {
  const out: Obj = { name: prompt.name };
  assign(out, 'title', text(prompt.title, MAX_TITLE));
  assign(out, 'description', text(prompt.description, o.maxDescriptionBytes));
  if (Array.isArray(prompt.arguments)) {
    out.arguments = prompt.arguments
      .filter((a) => isObject(a) && typeof a.name === 'string')
      .slice(0, MAX_ARGUMENTS)
      .map((a) => {
        const arg: Obj = { name: text(a.name, MAX_TITLE) };
        assign(arg, 'title', text((a as Obj).title, MAX_TITLE));
        assign(arg, 'description', text(a.description, MAX_ARGUMENT_TEXT));
        if (typeof a.required === 'boolean') arg.required = a.required;
        return arg;
      });
  }
  assign(out, 'icons', icons(prompt.icons));
  assign(out, '_meta', small(prompt._meta));
  return out as unknown as Prompt;
}

function common(item: Obj, o: ItemBoundsOptions, out: Obj): void {
  assign(out, 'name', text(item.name, MAX_TITLE) ?? '');
  assign(out, 'title', text(item.title, MAX_TITLE));
  assign(out, 'description', text(item.description, o.maxDescriptionBytes));
  assign(out, 'mimeType', mimeType(item.mimeType));
  assign(out, 'annotations', small(item.annotations));
  assign(out, 'icons', icons(item.icons));
  assign(out, '_meta', small(item._meta));
}

export function boundResource(resource: Resource, o: ItemBoundsOptions): Resource | ItemFinding {
  if (!routableUri(resource.uri)) return { rule: 'unroutable-uri', item: String(resource.uri).slice(0, 128) };
  const out: Obj = { uri: resource.uri };
  common(resource as unknown as Obj, o, out);
  if (typeof resource.size === 'number' && Number.isFinite(resource.size)) out.size = resource.size;
  return out as unknown as Resource;
}

export function boundTemplate(
  template: ResourceTemplate,
  o: ItemBoundsOptions,
): ResourceTemplate | ItemFinding {
  const t = template.uriTemplate;
  if (typeof t !== 'string' || t.length > 1024 || !routableUri(t)) {
    return { rule: 'unroutable-uri', item: String(t).slice(0, 128) };
  }
  const out: Obj = { uriTemplate: t };
  common(template as unknown as Obj, o, out);
  return out as unknown as ResourceTemplate;
}

export function isFinding(v: unknown): v is ItemFinding {
  return isObject(v) && typeof v.rule === 'string' && typeof v.item === 'string';
}
