/// <reference path="./wasm.d.ts" />
// Code mode's engine (#50): the QuickJS WebAssembly imported as a compiled module, since a Worker
// cannot compile WebAssembly from bytes at run time (the bundle copies the file beside worker.js).
// Its own module, imported when a run first needs it: Node (the tests that import the Workers
// platform) has no loader for a .wasm import. Imported by its file path, not the package's
// `/wasm` export: wrangler picks a module's loader by the import's own text (`**/*.wasm`), and
// esbuild (`npm run build:workers`) copies it beside worker.js the same way.
import quickjsWasm from '../../node_modules/@jitl/quickjs-wasmfile-release-sync/dist/emscripten-module.wasm';

export default quickjsWasm;
