import type { AsMetadata, Challenge, Fetch, ResourceMetadata } from './types.js';

/** https, or http to a loopback host. */
export function isAllowedEndpoint(url: string): boolean {
  void url;
  throw new Error('todo');
}

/** RFC 9728 discovery of the server's protected-resource metadata. */
export async function discoverResource(
  f: Fetch,
  serverUrl: string,
  c?: Challenge,
): Promise<ResourceMetadata> {
  void f;
  void serverUrl;
  void c;
  throw new Error('todo');
}

/** Same origin, and the server URL's path starts with the resource's path at a segment boundary. */
export function resourceMatches(serverUrl: string, resource: string): boolean {
  void serverUrl;
  void resource;
  throw new Error('todo');
}

/** RFC 8414 / OIDC discovery, in the MCP order, with the issuer identity and PKCE checks. */
export async function discoverAuthorizationServer(f: Fetch, issuer: string): Promise<AsMetadata> {
  void f;
  void issuer;
  throw new Error('todo');
}
