import { ManifoldError } from '../../errors.js';
import { rawResultMessage } from '../../protocol/jsonrpc.js';
import type { Edge } from './edge.js';
import { dressedJson, type Exchange } from './exchange.js';
import { json, type Reply } from './http-in.js';
import { LEGACY_METHODS } from './legacy.js';
import { MODERN_METHODS } from './modern.js';
import { completionComplete, promptsGet, resourcesRead } from './relay/requests.js';
import { toolsCall } from './relay/tools-call.js';
import { taskMethod } from './tasks.js';

type Handler = (edge: Edge, ex: Exchange) => Promise<Reply>;

/** The methods both eras serve the same way. */
const COMMON = new Map<string, Handler>([
  ['tools/call', toolsCall],
  ['prompts/get', promptsGet],
  ['resources/read', resourcesRead],
  ['completion/complete', completionComplete],
  ['tools/list', toolsList],
  ['prompts/list', (edge, ex) => surfaceList(edge, ex, 'prompts')],
  ['resources/list', (edge, ex) => surfaceList(edge, ex, 'resources')],
  ['resources/templates/list', (edge, ex) => surfaceList(edge, ex, 'templates')],
  ['tasks/get', taskMethod],
  ['tasks/update', taskMethod],
  ['tasks/cancel', taskMethod],
  ['tasks/result', taskMethod],
  ['tasks/list', taskMethod],
]);

/**
 * Routes one request to its handler: its era's own methods first, then those both eras share.
 * With tracing on, each shared method gets its span here: ended when its answer is ready, or, for
 * a relayed request, when its upstream call settles (relay/relay.ts).
 */
export function dispatch(edge: Edge, ex: Exchange): Promise<Reply> {
  const method = ex.request.method;
  const own = (ex.era === 'legacy' ? LEGACY_METHODS : MODERN_METHODS).get(method);
  if (own) return own(edge, ex);
  const handler = COMMON.get(method) ?? unknown;
  if (!edge.tracing) return handler(edge, ex);
  return traced(edge, ex, handler);
}

async function traced(edge: Edge, ex: Exchange, handler: Handler): Promise<Reply> {
  const t = edge.tracing!.begin(ex);
  ex.trace = t;
  try {
    const reply = await handler(edge, ex);
    if (!t.held) t.finish();
    return reply;
  } catch (e) {
    t.fail(e);
    t.finish();
    throw e;
  }
}

async function unknown(_edge: Edge, ex: Exchange): Promise<Reply> {
  throw new ManifoldError('ERR_METHOD_NOT_FOUND', `Method not found: ${ex.request.method.slice(0, 64)}`);
}

async function toolsList(edge: Edge, ex: Exchange): Promise<Reply> {
  const page = await edge.gateway.pages.listToolsJson(ex.principal, ex.request.params?.cursor);
  return json(rawResultMessage(ex.request.id, dressedJson(ex, page, edge.listCache)));
}

async function surfaceList(
  edge: Edge,
  ex: Exchange,
  kind: 'prompts' | 'resources' | 'templates',
): Promise<Reply> {
  const page = await edge.gateway.pages.listSurfaceJson(kind, ex.principal, ex.request.params?.cursor);
  return json(rawResultMessage(ex.request.id, dressedJson(ex, page, edge.listCache)));
}
