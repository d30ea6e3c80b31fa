import type { SecretBox } from './box.js';
import type {
  AsMetadata,
  Challenge,
  Fetch,
  OAuthClient,
  PendingFlow,
  ResourceMetadata,
  TokenSet,
} from './types.js';

export function selectScopes(
  c: Challenge | undefined,
  prm: ResourceMetadata,
  as: AsMetadata,
  previous: readonly string[],
  extra: readonly string[],
): string[] | undefined {
  void [c, prm, as, previous, extra];
  throw new Error('todo');
}

export type AuthorizationParams = Omit<
  PendingFlow,
  'v' | 'verifier' | 'exp' | 'issAdvertised' | 'clientId' | 'redirectUri'
>;

export async function startAuthorization(
  as: AsMetadata,
  client: OAuthClient,
  p: AuthorizationParams,
  box: SecretBox,
  ttlMs: number,
  now: number,
): Promise<{ url: string; state: string; exp: number }> {
  void [as, client, p, box, ttlMs, now];
  throw new Error('todo');
}

export async function openCallback(
  query: URLSearchParams,
  box: SecretBox,
  now: number,
): Promise<{ pending: PendingFlow; code: string }> {
  void [query, box, now];
  throw new Error('todo');
}

export async function redeemCode(
  f: Fetch,
  as: AsMetadata,
  client: OAuthClient,
  pending: PendingFlow,
  code: string,
  now: number,
): Promise<TokenSet> {
  void [f, as, client, pending, code, now];
  throw new Error('todo');
}

export async function refresh(
  f: Fetch,
  as: AsMetadata,
  client: OAuthClient,
  t: TokenSet,
  now: number,
): Promise<TokenSet> {
  void [f, as, client, t, now];
  throw new Error('todo');
}

export async function clientCredentials(
  f: Fetch,
  as: AsMetadata,
  client: OAuthClient,
  resource: string,
  scopes: string[] | undefined,
  now: number,
): Promise<TokenSet> {
  void [f, as, client, resource, scopes, now];
  throw new Error('todo');
}

export async function revoke(f: Fetch, as: AsMetadata, client: OAuthClient, t: TokenSet): Promise<void> {
  void [f, as, client, t];
  throw new Error('todo');
}
