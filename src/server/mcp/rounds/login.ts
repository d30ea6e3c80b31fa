/**
 * A `user` server's caller who has not signed in yet (#19): the call is answered
 * with the caller's own login link, in the client's own way.
 *
 * - A legacy client that declared `elicitation.url` gets JSON-RPC error -32042
 *   (URLElicitationRequiredError, spec 2025-11-25: client/elicitation, URL mode) with the link; it
 *   calls again once its user has signed in.
 * - A modern client that declared `elicitation.url` gets an MRTR `input_required` result with an
 *   `elicitation/create` in URL mode (spec 2026-07-28 removed -32042) and a sealed requestState;
 *   the retry finds the token in the store, or is asked again, at most three rounds.
 * - Any other client gets an isError result (a JSON-RPC error for other methods) whose text
 *   names the link: a person can still open it.
 *
 * The link carries only the PKCE challenge and a sealed state, no token (docs/security.md).
 */
import { ManifoldError } from '../../../errors.js';
import { isObject } from '../../../lib/json.js';
import { errorMessage, rawResultMessage, resultMessage } from '../../../protocol/jsonrpc.js';
import type { UpstreamAuthRequired } from '../../../upstream/call-errors.js';
import type { Edge } from '../edge.js';
import type { Exchange } from '../exchange.js';
import type { Reply } from '../http-in.js';
import { json } from '../http-in.js';
import { inputRequiredResult } from './mrtr.js';

/** The key of the gateway's login request among a modern client's input requests. */
export const LOGIN_INPUT_KEY = 'manifold.login';
/** spec 2025-11-25: URLElicitationRequiredError. */
export const URL_ELICITATION_REQUIRED = -32042;
/** Rounds of "sign in, then retry" a modern call may take before it is answered with the text. */
const MAX_ROUNDS = 3;
const STATE_TTL_MS = 10 * 60_000;

interface LoginState {
  v: 1;
  k: 'login';
  p: string;
  m: string;
  n: string;
  x: number;
  r: number;
}

/** Whether the client said it can open a URL for its user (elicitation.url). */
export function canElicitUrl(capabilities: Record<string, unknown>): boolean {
  const cap = capabilities.elicitation;
  return isObject(cap) && isObject(cap.url);
}

const message = (server: string) => `Sign in to ${server} to use its tools`;

/** The text for a client that cannot open a URL for its user. */
export function loginText(e: UpstreamAuthRequired): string {
  return e.loginUrl
    ? `Server ${e.server} needs you to sign in: ${e.loginUrl} (open it in a browser, then call again).`
    : e.publicMessage;
}

/**
 * A modern retry that answers the gateway's login request: its state is checked (principal,
 * method, target, expiry) and removed, so the call goes as the original would. Any other state
 * is left for the relay (relay/relay.ts). Returns the round the retry answers (0 for a first call).
 */
export async function takeLoginState(
  edge: Edge,
  ex: Exchange,
  target: string,
): Promise<{ ex: Exchange; round: number }> {
  const params = ex.request.params ?? {};
  if (ex.era !== 'modern' || typeof params.requestState !== 'string') return { ex, round: 0 };
  const sealer = await edge.gateway.states;
  const body = (await sealer.open(params.requestState)) as Partial<LoginState> | undefined;
  if (body?.k !== 'login') return { ex, round: 0 };
  if (
    body.v !== 1 ||
    body.p !== ex.principal.key ||
    body.m !== ex.request.method ||
    body.n !== target ||
    typeof body.x !== 'number' ||
    body.x < edge.gateway.platform.now() ||
    typeof body.r !== 'number'
  ) {
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      'Invalid or expired requestState: send the original request again without it',
    );
  }
  const { requestState: _s, inputResponses: _i, ...rest } = params;
  return { ex: { ...ex, request: { ...ex.request, params: rest } }, round: body.r };
}

/** The answer to a call whose caller must sign in first. */
export async function loginReply(
  edge: Edge,
  ex: Exchange,
  target: string,
  e: UpstreamAuthRequired,
  round: number,
): Promise<Reply> {
  const id = ex.request.id;
  const isTool = ex.request.method === 'tools/call';
  const text = loginText(e);
  const plain = () =>
    isTool
      ? json(
          resultMessage(
            id,
            ex.dress({
              content: [{ type: 'text', text }],
              isError: true,
              _meta: { 'manifold/login': e.rule },
            }),
          ),
        )
      : json(
          errorMessage(id, -32015, text, { manifold: 'ERR_UPSTREAM_AUTH', rule: e.rule, server: e.server }),
        );
  if (!e.loginUrl || !canElicitUrl(ex.clientCapabilities)) return plain();
  const elicitation = { mode: 'url', url: e.loginUrl, message: message(e.server) };
  if (ex.era === 'legacy') {
    return json(
      errorMessage(id, URL_ELICITATION_REQUIRED, 'This request needs you to sign in first', {
        elicitations: [{ ...elicitation, elicitationId: crypto.randomUUID() }],
      }),
    );
  }
  if (round >= MAX_ROUNDS) return plain();
  const sealer = await edge.gateway.states;
  const state = await sealer.seal({
    v: 1,
    k: 'login',
    p: ex.principal.key,
    m: ex.request.method,
    n: target,
    x: edge.gateway.platform.now() + STATE_TTL_MS,
    r: round + 1,
  } satisfies LoginState);
  const requests = { [LOGIN_INPUT_KEY]: { method: 'elicitation/create', params: elicitation } };
  return json(rawResultMessage(id, JSON.stringify(inputRequiredResult(requests, state, edge.serverInfo))));
}
