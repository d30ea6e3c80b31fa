/**
 * Reads an MCP Registry (`gateway.registry.url`) through the platform's egress-guarded fetch
 * (SECURITY D1-D7 apply to it like to any upstream): a search, and one server at one version.
 * Every answer is bounded, parsed once and checked against the registry format before use.
 */
import { readTextCapped } from '../lib/read-capped.js';
import { firstProblem, type ServerResponse, serverList, serverResponse } from './server-json.js';

/** Why a registry lookup failed: nothing by that name, unreachable, or an answer not in its format. */
export class RegistryError extends Error {
  constructor(
    readonly kind: 'not-found' | 'unavailable' | 'malformed',
    message: string,
  ) {
    super(message);
    this.name = 'RegistryError';
  }
}

/** A registry answer larger than this is refused (a page of servers is a few hundred KiB). */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
const TIMEOUT_MS = 15_000;

export interface RegistryHit {
  name: string;
  version: string;
  description: string;
}

export interface RegistryClient {
  /** Servers whose name matches `words` (the registry's substring search), latest versions only. */
  search(words: string, limit?: number): Promise<{ hits: RegistryHit[]; skipped: number }>;
  /** One server at `version` (default the latest); ERR_NOT_FOUND when the registry has none. */
  get(name: string, version?: string): Promise<ServerResponse>;
}

export function registryClient(fetch: typeof globalThis.fetch, baseUrl: string): RegistryClient {
  const base = baseUrl.replace(/\/+$/, '');
  async function read(path: string): Promise<unknown> {
    const url = `${base}${path}`;
    let res: Response;
    try {
      res = await fetch(url, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (e) {
      // The egress guard's own words (a denied host) are kept; the URL is the operator's own.
      const why = e instanceof Error ? e.message : String(e);
      throw new RegistryError('unavailable', `the registry at ${base} could not be reached: ${why}`);
    }
    if (res.status === 404) {
      await res.body?.cancel().catch(() => {});
      throw new RegistryError('not-found', 'not found');
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => {});
      throw new RegistryError('unavailable', `the registry at ${base} answered ${res.status}`);
    }
    const text = await readTextCapped(
      res.body,
      MAX_ANSWER_BYTES,
      () => new RegistryError('unavailable', `the registry's answer is over ${MAX_ANSWER_BYTES} bytes`),
    );
    try {
      return JSON.parse(text);
    } catch {
      throw new RegistryError(
        'malformed',
        `the registry at ${base} answered with something that is not JSON`,
      );
    }
  }

  return {
    async search(words, limit = 20) {
      const q = new URLSearchParams({ search: words, version: 'latest', limit: String(limit) });
      const list = serverList.safeParse(await read(`/v0.1/servers?${q}`));
      if (!list.success) {
        throw new RegistryError('malformed', `the registry's list is malformed: ${firstProblem(list.error)}`);
      }
      const hits: RegistryHit[] = [];
      let skipped = 0;
      for (const item of list.data.servers) {
        // One malformed entry is skipped and counted; it does not hide the others.
        const one = serverResponse.safeParse(item);
        if (!one.success) {
          skipped++;
          continue;
        }
        const s = one.data.server;
        hits.push({ name: s.name, version: s.version, description: s.description ?? '' });
      }
      return { hits, skipped };
    },
    async get(name, version = 'latest') {
      let raw: unknown;
      try {
        raw = await read(`/v0.1/servers/${encodeURIComponent(name)}/versions/${encodeURIComponent(version)}`);
      } catch (e) {
        if (e instanceof RegistryError && e.kind === 'not-found') {
          throw new RegistryError(
            'not-found',
            version === 'latest'
              ? `the registry at ${base} has no server named ${name}`
              : `the registry at ${base} has no version ${version} of ${name}`,
          );
        }
        throw e;
      }
      const one = serverResponse.safeParse(raw);
      if (!one.success) {
        throw new RegistryError(
          'malformed',
          `the registry's entry for ${name} is malformed (${firstProblem(one.error)}), so nothing is added`,
        );
      }
      if (one.data.server.name !== name) {
        throw new RegistryError(
          'malformed',
          `the registry answered for ${one.data.server.name.slice(0, 200)}, not ${name}`,
        );
      }
      if (version !== 'latest' && one.data.server.version !== version) {
        throw new RegistryError(
          'malformed',
          `the registry answered with version ${one.data.server.version.slice(0, 40)}, not ${version}`,
        );
      }
      return one.data;
    },
  };
}
