import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { ManifoldError } from '../../errors.js';

// The gateway never validates upstream output through the SDK; this keeps Ajv (which uses
// `new Function`, forbidden on Workers) out of the client.
const noValidation: jsonSchemaValidator = {
  getValidator: () => (input) => ({ valid: true, data: input as never, errorMessage: undefined }),
};

/**
 * The SDK client an upstream connection uses. `capabilities` are the client features the gateway
 * relays for this server (legacy servers learn them once, at initialize).
 */
export function newSdkClient(version: string, capabilities: Record<string, unknown> = {}): Client {
  const client = new Client(
    { name: 'manifold', version },
    { capabilities, jsonSchemaValidator: noValidation },
  );
  // Any other upstream -> client request is refused clearly.
  client.fallbackRequestHandler = async (request) => {
    throw new McpError(ErrorCode.MethodNotFound, `Manifold does not relay ${request.method} to clients`);
  };
  return client;
}

export function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ManifoldError('ERR_UPSTREAM_TIMEOUT', `${what} timed out after ${ms} ms`)),
      ms,
    );
  });
  return Promise.race([p, deadline]).finally(() => timer !== undefined && clearTimeout(timer));
}
