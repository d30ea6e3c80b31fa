/**
 * What makes a Node gateway reload its config (#16): SIGHUP, and changes to the config file
 * (`gateway.watchConfig`, on by default). The file is read and validated exactly as at start; a
 * config with errors is refused whole and logged error by error with its JSON path, and the
 * running one keeps serving. A valid one goes to the gateway's reloader (src/gateway/reload.ts).
 */
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Config } from '../../../src/config/types.js';
import type { Gateway } from '../../../src/gateway/gateway.js';
import type { Logger } from '../../../src/lib/log.js';
import { parseConfigText } from './load.js';

/**
 * Editors save in bursts (write a temporary file, rename it over the old one, touch it): one
 * reload once the burst has been quiet this long.
 */
const DEBOUNCE_MS = 250;

export interface ConfigReloadOptions {
  /** The config file, resolved. */
  path: string;
  /** Its text as the running config was read from. */
  text: string;
  gateway: Gateway;
  log: Logger;
  /** The list the logger redacts: a reload's interpolated secrets join it before anything is logged. */
  secrets: string[];
  /** What the command line overrides in every config read (`--port`, `--host`). */
  adjust?: (config: Config) => void;
  env?: Record<string, string | undefined>;
}

export interface ConfigReload {
  /** Reads the file and applies it if it changed; never throws (every outcome is logged). */
  reload(trigger: 'SIGHUP' | 'watch'): Promise<void>;
  /** Stops watching (shutdown). */
  close(): void;
}

export function configReload(options: ConfigReloadOptions): ConfigReload {
  const { path, gateway, log } = options;
  /** The text the running config came from: the same text again changes nothing. */
  let applied = options.text;
  /** The last text refused: the watch does not log the same errors for every touch of the file. */
  let refused: string | undefined;
  let watcher: FSWatcher | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;
  let running: Promise<void> = Promise.resolve();

  const setWatching = (on: boolean) => {
    if (on === (watcher !== undefined) || closed) return;
    if (!on) {
      watcher?.close();
      watcher = undefined;
      return;
    }
    const name = basename(path);
    // The directory, not the file: an editor that renames a new file over the old one leaves a
    // watch on the file itself looking at a file that is gone. `..data` is how a Kubernetes
    // ConfigMap volume swaps its files in.
    watcher = watch(dirname(path), (_event, file) => {
      if (file && file !== name && !String(file).startsWith('..')) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = undefined;
        void api.reload('watch');
      }, DEBOUNCE_MS);
    });
    watcher.on('error', (e) => {
      log.warn('config.watch_failed', { error: String(e).slice(0, 200), message: 'SIGHUP still reloads' });
      watcher?.close();
      watcher = undefined;
    });
    watcher.unref();
  };

  const once = async (trigger: 'SIGHUP' | 'watch') => {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      // Mid-rename, or deleted: the running config stays; the next change or SIGHUP tries again.
      const code = (e as NodeJS.ErrnoException).code ?? 'unknown error';
      log.warn('config.reload_refused', {
        trigger,
        path,
        errors: [{ path: '', message: `cannot read ${path}: ${code}` }],
      });
      return;
    }
    if (text === applied || (trigger === 'watch' && text === refused)) {
      if (trigger === 'SIGHUP') log.info('config.reload_unchanged', { trigger, path });
      return;
    }
    const result = parseConfigText(text, path, options.env);
    for (const w of result.warnings) log.warn('config.warning', { path: w.path, message: w.message });
    if (!result.ok) {
      refused = text;
      // Every error, as at start: the JSON path, what is wrong, the fix. Messages never quote a
      // value (config/field-text.ts), and the logger redacts every secret it knows.
      log.error('config.reload_refused', {
        trigger,
        path,
        errors: result.errors,
        message: `${result.errors.length} error(s) in ${path}: nothing was applied, the running config stays`,
      });
      return;
    }
    for (const s of result.secrets) if (!options.secrets.includes(s)) options.secrets.push(s);
    options.adjust?.(result.config);
    try {
      await gateway.reloader.apply(result.config, result.secrets);
      applied = text;
      refused = undefined;
      setWatching(gateway.config.gateway.watchConfig);
    } catch (e) {
      log.warn('config.reload_failed', { trigger, error: String(e).slice(0, 200) });
    }
  };

  const api: ConfigReload = {
    reload(trigger) {
      if (closed) return Promise.resolve();
      running = running.then(() => once(trigger));
      return running;
    },
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      watcher?.close();
      watcher = undefined;
    },
  };
  setWatching(gateway.config.gateway.watchConfig);
  return api;
}
