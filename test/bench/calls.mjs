// The bench's requests that more than one bench script sends, so that each measures the same
// bytes: a 2026-07-28 call (S3, B3, B4, the scale section's) and the legacy session's opening.

export const ACCEPT = 'application/json, text/event-stream';

/** A 2025-11-25 `initialize` request, from a client called `name`. */
export const legacyInitialize = (name = 'bench') => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name, version: '1' } },
});

/** A 2026-07-28 request's own `_meta`: its version, capabilities and identity. */
export const modernMeta = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
};

/** A 2026-07-28 `tools/call` of `name` (echo's arguments): no session, `_meta` and headers. */
export const modernCall = (name) => ({
  body: JSON.stringify({
    jsonrpc: '2.0',
    id: 7,
    method: 'tools/call',
    params: { name, arguments: { message: 'hello' }, _meta: modernMeta },
  }),
  headers: (token) => ({
    'content-type': 'application/json',
    accept: ACCEPT,
    authorization: `Bearer ${token}`,
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': name,
  }),
});
