/**
 * The types shared by the upstream OAuth client (#19): the protocol core (challenge, discovery,
 * registration, flow, box), the credential store, and the per-server manager that wraps fetch.
 * Nothing here holds a secret in a field that is logged: OAuthError messages name a rule and a
 * host, never a token, a client secret or a URL with its query.
 */

import type { TokenAuthMethod } from '../../config/types.js';

export type OAuthRule =
  | 'no-resource-metadata'
  | 'resource-mismatch'
  | 'no-as-metadata'
  | 'issuer-mismatch'
  | 'no-pkce'
  | 'insecure-endpoint'
  | 'no-registration'
  | 'registration-failed'
  | 'state-invalid'
  | 'iss-missing'
  | 'iss-mismatch'
  | 'authorization-denied'
  | 'token-failed'
  | 'refresh-failed'
  | 'step-up-exhausted'
  | 'issuer-not-configured'
  | 'login-required';

/** A refusal of the OAuth client, by rule. The message carries no secret and no URL query. */
export class OAuthError extends Error {
  constructor(
    readonly rule: OAuthRule,
    message: string,
  ) {
    super(message);
    this.name = 'OAuthError';
  }
}

/** One challenge of a WWW-Authenticate header (RFC 9110 §11.6.1), with the Bearer parameters MCP reads. */
export interface Challenge {
  /** Lower-cased scheme, e.g. "bearer". */
  scheme: string;
  /** Parameter names lower-cased; values unquoted. */
  params: Record<string, string>;
  resourceMetadata?: string;
  scope?: string[];
  error?: string;
}

/** RFC 9728 protected-resource metadata, as used. */
export interface ResourceMetadata {
  /** The URL it was read from. */
  url: string;
  /** `resource`, exactly as published (sent as the RFC 8707 indicator unchanged). */
  resource: string;
  authorizationServers: string[];
  scopesSupported?: string[];
}

/** RFC 8414 / OpenID Connect discovery metadata, as used (issuer already checked). */
export interface AsMetadata {
  issuer: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  registrationEndpoint?: string;
  revocationEndpoint?: string;
  scopesSupported?: string[];
  grantTypesSupported?: string[];
  tokenAuthMethods?: string[];
  /** `authorization_response_iss_parameter_supported` (RFC 9207). */
  issParameterSupported: boolean;
  /** `client_id_metadata_document_supported`. */
  cimdSupported: boolean;
}

/** The gateway's client registration at one authorization server. */
export interface OAuthClient {
  /** Pinned issuer (pre-registered credentials are bound to it). */
  issuer?: string;
  clientId: string;
  clientSecret?: string;
  authMethod: TokenAuthMethod;
  source: 'config' | 'cimd' | 'dcr';
  redirectUri: string;
}

/** Tokens for one (server, subject), bound to the issuer that minted them. */
export interface TokenSet {
  issuer: string;
  resource: string;
  accessToken: string;
  tokenType: string;
  refreshToken?: string;
  /** Epoch ms. */
  expiresAt?: number;
  scope: string[];
  /**
   * The client it was issued to (the gateway's registration or the CLI's): a refresh and a
   * revocation present that client, as RFC 6749 §6 binds a refresh token to it.
   */
  clientId?: string;
}

/** What an authorization in progress needs at the callback; sealed into `state`, never stored. */
export interface PendingFlow {
  v: 1;
  server: string;
  subject: string;
  issuer: string;
  verifier: string;
  redirectUri: string;
  resource: string;
  scopes: string[];
  clientId: string;
  issAdvertised: boolean;
  /** Epoch ms. */
  exp: number;
}

export type Fetch = typeof fetch;

/** '' is the deployment's own identity (mode `gateway`); otherwise a principal key (mode `user`). */
export type SubjectKey = string;

export type AuthState = 'static' | 'ready' | 'needs-login' | 'refused';
