/**
 * `auth: "static"` (#19): the configured headers, whose `${VAR}` secrets are read again after a
 * 401 through `Platform.readSecret` (Node: the variable, or the file `NAME_FILE` names, read
 * afresh; Workers: the binding). A secret rotated in place is picked up with no restart: when the
 * re-read headers differ, the request is sent once more with them; otherwise the 401 stands.
 */

import { interpolateString } from '../../config/interpolate.js';
import type { ServerConfig } from '../../config/types.js';
import type { Logger } from '../../lib/log.js';
import type { UpstreamAuth } from './auth-fetch.js';

export function createStaticAuth(
  config: ServerConfig,
  o: { readSecret?(name: string): string | undefined; log: Logger; addSecret?(value: string): void },
): UpstreamAuth {
  /** The headers now in force, when a re-read changed them (until then, the configured ones). */
  let current: Record<string, string> | undefined;
  const reread = (): Record<string, string> | undefined => {
    const read = o.readSecret;
    const templates = config.headerTemplates;
    if (!read || !templates) return undefined;
    // A Proxy env reads each name only when the template names it, and afresh every time.
    // interpolateString asks Object.hasOwn first: answer it too, or every name reads as unset.
    const value = (name: string | symbol) => (typeof name === 'string' ? read(name) : undefined);
    const env = new Proxy({} as Record<string, string | undefined>, {
      get: (_t, name) => value(name),
      getOwnPropertyDescriptor: (_t, name) => {
        const v = value(name);
        return v === undefined
          ? undefined
          : { value: v, writable: false, enumerable: true, configurable: true };
      },
    });
    const out: Record<string, string> = {};
    for (const [k, tpl] of Object.entries(templates)) {
      const r = interpolateString(tpl, env);
      if (r.problems.length > 0) return undefined;
      for (const s of r.secrets) o.addSecret?.(s);
      out[k] = r.value;
    }
    return out;
  };
  return {
    server: config.name,
    authorize: async () => current ?? {},
    async onRefused(_subject, status) {
      if (status !== 401) return 'stop';
      const next = reread();
      if (!next) return 'stop';
      const before = current ?? config.headers;
      const changed = Object.entries(next).some(([k, v]) => before[k] !== v);
      if (!changed) return 'stop';
      current = next;
      o.log.info('oauth.static_reread', { server: config.name });
      return 'retry';
    },
    state: () => ({ state: 'static' }),
    beginLogin: async () => {
      throw new Error('a static server has no login');
    },
    logout: async () => {},
    onChange: () => {},
  };
}
