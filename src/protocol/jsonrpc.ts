import { ManifoldError } from '../errors.js';
import { isObject } from '../lib/json.js';

export type JsonRpcId = string | number;
export type Params = Record<string, unknown>;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: JsonRpcId;
  method: string;
  params?: Params;
}
export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: Params;
}

export type Incoming =
  | { kind: 'request'; message: JsonRpcRequest }
  | { kind: 'notification'; message: JsonRpcNotification }
  | { kind: 'response'; message: { id: JsonRpcId; result?: unknown; error?: unknown } };

export const RpcCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  RequestTimeout: -32001,
  Cancelled: -32800,
} as const;

/**
 * Classifies one parsed body. Batches are refused (removed in 2025-06-18; SECURITY B2), and
 * anything that is not a JSON-RPC 2.0 message is an invalid request, not a crash.
 */
export function classify(body: unknown): Incoming {
  if (Array.isArray(body)) throw new ManifoldError('ERR_BATCH', 'JSON-RPC batches are not supported');
  if (!isObject(body) || body.jsonrpc !== '2.0') {
    throw new ManifoldError('ERR_BAD_REQUEST', 'expected one JSON-RPC 2.0 message');
  }
  const { id, method, params } = body;
  const validId = (typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))) as boolean;
  if (params !== undefined && !isObject(params)) {
    throw new ManifoldError('ERR_BAD_REQUEST', 'params must be an object');
  }
  if (typeof method === 'string') {
    if (id === undefined) return { kind: 'notification', message: body as unknown as JsonRpcNotification };
    if (!validId) throw new ManifoldError('ERR_BAD_REQUEST', 'id must be a string or a number');
    return { kind: 'request', message: body as unknown as JsonRpcRequest };
  }
  if (validId && ('result' in body || 'error' in body)) {
    return { kind: 'response', message: body as { id: JsonRpcId; result?: unknown; error?: unknown } };
  }
  throw new ManifoldError('ERR_BAD_REQUEST', 'expected one JSON-RPC 2.0 message');
}

export function resultMessage(id: JsonRpcId, result: unknown): string {
  return JSON.stringify({ jsonrpc: '2.0', id, result });
}

/** A response whose result is already serialized (relayed results are serialized once). */
export function rawResultMessage(id: JsonRpcId, resultJson: string): string {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${resultJson}}`;
}

export function errorMessage(id: JsonRpcId | null, code: number, message: string, data?: unknown): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    error: data === undefined ? { code, message } : { code, message, data },
  });
}
