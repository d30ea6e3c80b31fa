/** A .wasm import: workerd hands the Worker a compiled module (wrangler's CompiledWasm rule). */
declare module '*.wasm' {
  const module: WebAssembly.Module;
  export default module;
}
