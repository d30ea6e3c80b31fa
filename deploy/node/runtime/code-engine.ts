import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';

/**
 * Code mode's engine (#50) for the Node host: the QuickJS WebAssembly file read from its package
 * and compiled once per process. Read here rather than by the package itself, which looks for the
 * file beside its own module: inside the bundle (deploy/node/bundle.mjs) that module is gone.
 */
let compiled: Promise<WebAssembly.Module> | undefined;

export function nodeCodeEngine(): Promise<WebAssembly.Module> {
  compiled ??= (async () => {
    const path = createRequire(import.meta.url).resolve('@jitl/quickjs-wasmfile-release-sync/wasm');
    return WebAssembly.compile(await readFile(path));
  })().catch((e: unknown) => {
    compiled = undefined;
    throw e;
  });
  return compiled;
}
