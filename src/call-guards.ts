import type { Catalog, CatalogEntry } from './aggregate/catalog.js';
import type { Config } from './config/types.js';
import { type ArgsCheck, compileArgsValidator } from './guards/args.js';
import { quarantineDescription } from './guards/drift.js';
import { resultCap } from './guards/result-cap.js';
import { contentsCap, promptResultCap } from './guards/surface-caps.js';
import type { Logger } from './log.js';

type Result = Record<string, unknown>;
type Validator = ((args: unknown) => ArgsCheck) | null;

/**
 * The per-call guards of tools/call, wired from the pure policies in src/guards: quarantine
 * refusal, argument validation (validators compiled once per catalog snapshot), and the result cap
 * (built once per server).
 */
export class CallGuards {
  private validators = new WeakMap<Catalog, Map<string, Validator>>();
  private caps = new Map<string, { cap: ReturnType<typeof resultCap>; max: number }>();
  private surfaceCaps = new Map<
    string,
    { prompt: ReturnType<typeof promptResultCap>; contents: ReturnType<typeof contentsCap>; max: number }
  >();

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
  ) {}

  /**
   * A refusal for a tool that is listed but must not run (drift quarantine), as an isError result;
   * undefined when the call may proceed.
   */
  refuse(entry: CatalogEntry): Result | undefined {
    if (!entry.quarantined) return undefined;
    return { content: [{ type: 'text', text: quarantineDescription(entry.server) }], isError: true };
  }

  /**
   * Validates arguments against the tool's full input schema. Returns an isError result listing
   * the problems (with the schema, so a model can correct itself), or undefined when valid.
   */
  checkArguments(catalog: Catalog, entry: CatalogEntry, args: Record<string, unknown>): Result | undefined {
    let perCatalog = this.validators.get(catalog);
    if (!perCatalog) {
      perCatalog = new Map();
      this.validators.set(catalog, perCatalog);
    }
    let validate = perCatalog.get(entry.name);
    if (validate === undefined) {
      const compiled = compileArgsValidator(entry.full.inputSchema);
      if (compiled.ok) validate = compiled.validate;
      else {
        validate = null;
        this.log.warn('guard.args_unvalidated', {
          rule: 'schema-unsupported',
          server: entry.server,
          tool: entry.name,
          reason: compiled.reason,
        });
      }
      perCatalog.set(entry.name, validate);
    }
    if (validate === null) return undefined;
    const check = validate(args);
    if (check.valid) return undefined;
    const text = [
      `Invalid arguments for tool ${entry.name}; it was not called:`,
      ...check.problems.map((p) => `- ${p}`),
      '',
      `Full input schema: ${JSON.stringify(entry.full.inputSchema)}`,
    ].join('\n');
    return { content: [{ type: 'text', text }], isError: true };
  }

  /**
   * The same cap for a `prompts/get` or `resources/read` answer of `server` (its maxResultBytes),
   * logged like a tool result's.
   */
  capSurface(server: string, kind: 'prompt' | 'contents', what: string, result: Result): Result {
    let held = this.surfaceCaps.get(server);
    if (!held) {
      const max =
        this.config.servers.find((s) => s.name === server)?.maxResultBytes ??
        this.config.gateway.maxResultBytes;
      held = { prompt: promptResultCap(max), contents: contentsCap(max), max };
      this.surfaceCaps.set(server, held);
    }
    const capped = (kind === 'prompt' ? held.prompt : held.contents)(result);
    if (capped.truncated) {
      this.log.info('guard.result_truncated', {
        server,
        [kind === 'prompt' ? 'prompt' : 'uri']: what.slice(0, 256),
        bytes: capped.originalBytes,
        max: held.max,
      });
    }
    return capped.result;
  }

  /**
   * Applies the server's result cap (E1) and returns the result serialized. Results that fit pass
   * through untouched and are serialized once (the cap's measurement is reused).
   */
  capResult(entry: CatalogEntry, result: Result): string {
    let held = this.caps.get(entry.server);
    if (!held) {
      const server = this.config.servers.find((s) => s.name === entry.server);
      const max = server?.maxResultBytes ?? this.config.gateway.maxResultBytes;
      held = { cap: resultCap(max), max };
      this.caps.set(entry.server, held);
    }
    const { cap, max } = held;
    const capped = cap(result);
    if (capped.truncated) {
      this.log.info('guard.result_truncated', {
        server: entry.server,
        tool: entry.name,
        bytes: capped.originalBytes,
        max,
      });
    }
    return capped.json ?? JSON.stringify(capped.result);
  }
}
