export { interpolateString } from './interpolate.js';
export { checkBindSafety, formatIssues, isLoopbackHost, parseConfig, parseConfigObject } from './load.js';
export {
  AUTH_DEFAULTS,
  DEFAULT_STORE_PATH,
  formatPath,
  GATEWAY_DEFAULTS,
  JWS_ALGORITHMS,
  RESERVED_NAME,
} from './schema.js';
export type {
  AuthConfig,
  Config,
  ConfigIssue,
  ConfigResult,
  DisclosureConfig,
  GatewayConfig,
  ServerConfig,
  TenantConfig,
  TransportKind,
} from './types.js';
