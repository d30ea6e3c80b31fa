/// <reference path="./wasm.d.ts" />
// Code mode's engine (#50): the QuickJS WebAssembly imported as a compiled module, since a Worker
// cannot compile WebAssembly from bytes at run time (the bundle copies the file beside worker.js).
// Its own module, imported when a run first needs it: Node (the tests that import the Workers
// platform) has no loader for a .wasm import.
import quickjsWasm from '@jitl/quickjs-wasmfile-release-sync/wasm';

export default quickjsWasm;
