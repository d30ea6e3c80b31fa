// Types for the parts of scale.mjs that TypeScript tests import (test/helpers/workerd.ts).

/** JSONC as wrangler reads it: comments and trailing commas removed, strings left alone. */
export function parseJsonc(text: string): unknown;

/** Miniflare options from wrangler.jsonc: Durable Object bindings, vars, compatibility date and flags. */
export function workerOptions(wranglerPath: string): {
  durableObjects: Record<string, { className: string; useSQLite: boolean }>;
  vars: Record<string, string>;
  compatibilityDate: string;
  compatibilityFlags: string[];
  modulesRules: { type: 'CompiledWasm'; include: string[] }[];
};

/** Bundles the Worker as `npm run build:workers` does, renamed into place; skipped when younger than `maxAgeMs`. */
export function buildWorkerBundle(root: string, maxAgeMs?: number): string;
