/**
 * The config in force as the status page shows it to an admin (#16): everything an operator
 * configured, with every value that could be a secret replaced by "***" whatever its content,
 * and then any interpolated `${VAR}` value left anywhere replaced by the gateway's redactor.
 */
import type { Config, GatewayConfig, ServerConfig } from '../../../config/types.js';
import type { GuardrailConfig } from '../../../guards/policy/types.js';
import type { Redactor } from '../../../lib/redact.js';

export const MASK = '***';

/** Each value of a map masked, its keys kept (which variables and headers are set is useful). */
const maskValues = (values: Record<string, string>) =>
  Object.fromEntries(Object.keys(values).map((k) => [k, MASK]));

/**
 * A URL without what may carry a credential: userinfo goes, query values are masked, the
 * fragment goes. A value that does not parse is masked whole (it is shown only to admins, but a
 * broken URL may still hold a token).
 */
export function maskUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return MASK;
  }
  u.username = '';
  u.password = '';
  u.hash = '';
  const keys = [...new Set(u.searchParams.keys())];
  u.search = '';
  for (const k of keys) u.searchParams.append(k, MASK);
  // URLSearchParams encodes "*"; the mask reads better as itself.
  return u.toString().replaceAll('%2A%2A%2A', MASK);
}

/** Guardrails (#51) with each webhook's headers masked and its URL stripped of credentials. */
function maskGuardrails(list: readonly GuardrailConfig[] | undefined): Record<string, unknown> {
  if (!list) return {};
  return {
    guardrails: list.map((g) =>
      g.type === 'webhook' ? { ...g, url: maskUrl(g.url), headers: maskValues(g.headers) } : g,
    ),
  };
}

function maskServer(s: ServerConfig): Record<string, unknown> {
  // headerTemplates: the headers as written, which may hold a literal secret; headers says enough.
  const { env, headers, url, auth, headerTemplates: _, guardrails, ...rest } = s;
  return {
    ...rest,
    ...maskGuardrails(guardrails),
    ...(url !== undefined ? { url: maskUrl(url) } : {}),
    env: maskValues(env),
    headers: maskValues(headers),
    ...(auth ? { auth: auth.clientSecret !== undefined ? { ...auth, clientSecret: MASK } : auth } : {}),
  };
}

function maskGateway(g: GatewayConfig): Record<string, unknown> {
  const { auth, cursorSecret, guardrails, ...rest } = g;
  const out: Record<string, unknown> = { ...rest, ...maskGuardrails(guardrails) };
  if (cursorSecret !== undefined) out.cursorSecret = MASK;
  if (g.oauth?.secret !== undefined) out.oauth = { ...g.oauth, secret: MASK };
  // A database URL carries its password: which kind of store is enough to show.
  if (g.store && 'postgres' in g.store) out.store = { postgres: MASK };
  if (auth === false) out.auth = false;
  else if (auth) {
    // The inline JWKS is the key material jwksFile resolved to: its presence is enough to show.
    const { secret, publicKey, jwks, jwksUrl, ...kept } = auth;
    out.auth = {
      ...kept,
      ...(jwksUrl !== undefined ? { jwksUrl: maskUrl(jwksUrl) } : {}),
      ...(secret !== undefined ? { secret: MASK } : {}),
      ...(publicKey !== undefined ? { publicKey: MASK } : {}),
      ...(jwks !== undefined ? { jwks: MASK } : {}),
    };
  }
  return out;
}

/**
 * The config with secrets masked, as a JSON-ready object.
 *
 * @example
 * maskedConfig(config, redact).servers[0].headers; // { Authorization: '***' }
 */
export function maskedConfig(config: Config, redact: Redactor): Record<string, unknown> {
  const masked = {
    gateway: maskGateway(config.gateway),
    servers: config.servers.map(maskServer),
    profiles: config.profiles.map(({ guardrails, ...p }) => ({ ...p, ...maskGuardrails(guardrails) })),
  };
  // Anything left that holds a ${VAR} value (a command argument, a cwd) is redacted too.
  return redactDeep(masked, redact) as Record<string, unknown>;
}

/**
 * Every string in a JSON-shaped value redacted, keys included. String by string, not over the
 * serialized JSON: a secret such as "true" must not rewrite a JSON literal.
 */
export function redactDeep(value: unknown, redact: Redactor): unknown {
  if (typeof value === 'string') return redact(value);
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, redact));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [redact(k), redactDeep(v, redact)]));
  }
  return value;
}
