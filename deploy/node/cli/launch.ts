#!/usr/bin/env node
/**
 * The CLI's entry (`dist/manifold.js`). Where Node has a module compile cache (22.1 and later), it
 * is turned on before the CLI's code is loaded: V8 then reads the bundle's compiled code back
 * instead of compiling it on every start. Node 20 has none, and the CLI loads as before.
 *
 * The cache lives in `.cache/` beside this file, inside the installed package: written by whoever
 * may write the package's code, and never in a directory other users share. Node checks each
 * entry against the source it was made from and its own version, and compiles afresh when either
 * differs or the directory cannot be written. `NODE_DISABLE_COMPILE_CACHE=1` turns it off.
 */
import nodeModule from 'node:module';
import { fileURLToPath } from 'node:url';

const enableCompileCache = (nodeModule as { enableCompileCache?: (dir?: string) => unknown })
  .enableCompileCache;
enableCompileCache?.(fileURLToPath(new URL('./.cache/', import.meta.url)));
await import('./main.js');
