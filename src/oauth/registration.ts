import type { AsMetadata, Fetch, OAuthClient } from './types.js';

export interface ObtainClientOptions {
  configured?: OAuthClient;
  cimdUrl?: string;
  stored?: OAuthClient;
  redirectUri: string;
  clientName: string;
  grantTypes: string[];
}

/** The client to use at this AS: configured, then CIMD, then a stored DCR client, then a new DCR. */
export async function obtainClient(
  f: Fetch,
  as: AsMetadata,
  o: ObtainClientOptions,
): Promise<{ client: OAuthClient; registered: boolean }> {
  void f;
  void as;
  void o;
  throw new Error('todo');
}

/** The client ID metadata document served at `url`. */
export function clientMetadataDocument(o: {
  url: string;
  clientName: string;
  redirectUris: string[];
}): Record<string, unknown> {
  void o;
  throw new Error('todo');
}
