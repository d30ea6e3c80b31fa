/**
 * Secrets on Node (#19): `NAME`, or the file that `NAME_FILE` names, read afresh each time (the
 * Docker and Kubernetes secret-file convention). A static upstream token in such a file can be
 * rotated by replacing the file: after a 401 the gateway reads it again (Platform.readSecret),
 * whereas `process.env` of a running process never changes.
 */
import { readFileSync } from 'node:fs';

type Env = Record<string, string | undefined>;

/** The contents of the file, less one trailing newline (what `echo` and most editors add). */
function readSecretFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').replace(/\r?\n$/, '');
  } catch {
    // Unreadable now (being replaced, removed): not a value; the caller keeps what it had.
    return undefined;
  }
}

/** `NAME_FILE`'s file when that variable is set, else `NAME`. */
export function readNodeSecret(name: string, env: Env = process.env): string | undefined {
  const file = env[`${name}_FILE`];
  if (file !== undefined && file !== '') return readSecretFile(file);
  return env[name];
}

/**
 * `env` as the config loader sees it: a `${NAME}` resolves as readNodeSecret does, so a value kept
 * in a `NAME_FILE` is found at start and on every reload too. Only names the config refers to are
 * read (a Proxy, not a copy that would read every `*_FILE` the process inherited).
 */
export function secretFileEnv(env: Env = process.env): Env {
  const value = (name: string | symbol) => (typeof name === 'string' ? readNodeSecret(name, env) : undefined);
  return new Proxy(
    {},
    {
      get: (_, name) => value(name),
      has: (_, name) => value(name) !== undefined,
      getOwnPropertyDescriptor: (_, name) => {
        const v = value(name);
        return v === undefined
          ? undefined
          : { value: v, writable: false, enumerable: true, configurable: true };
      },
      ownKeys: () => Reflect.ownKeys(env),
    },
  );
}
