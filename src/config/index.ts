export { interpolateString } from './interpolate.js';
export { formatIssues, parseConfig, parseConfigObject } from './load.js';
export { formatPath, GATEWAY_DEFAULTS, RESERVED_NAME } from './schema.js';
export type {
  Config,
  ConfigIssue,
  ConfigResult,
  DisclosureConfig,
  GatewayConfig,
  ServerConfig,
  TransportKind,
} from './types.js';
