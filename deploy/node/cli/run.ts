import { type ParseArgsConfig, parseArgs } from 'node:util';
import { ConfigLoadError, loadConfigFile } from './load.js';

/** Where a CLI command writes; tests pass their own. */
export interface CliIO {
  out(text: string): void;
  err(text: string): void;
  /** Asks a person and resolves with their line; absent when nobody is at a terminal. */
  ask?(question: string): Promise<string | undefined>;
}

/** A mistake in how the command was called: exit 2 with the usage text. */
export class UsageError extends Error {}
/** The command was understood but refused or failed: exit 1 with the message. */
export class CommandError extends Error {}

/** Parses a command's flags; a bad one is a usage error (exit 2). */
export function parseFlags<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

/** A usage error as every command writes it: what was wrong, then the command's usage. */
export function writeUsageError(name: string, usage: string, io: CliIO, message: string): void {
  io.err(`manifold ${name}: ${message}\n\n${usage}\n`);
}

/**
 * `parseFlags` for a command whose body returns its exit code itself: the flags, or undefined
 * once the usage error is written (the caller exits 2).
 */
export function flagsOr<T extends ParseArgsConfig>(
  name: string,
  usage: string,
  io: CliIO,
  config: T,
): ReturnType<typeof parseArgs<T>> | undefined {
  try {
    return parseFlags(config);
  } catch (e) {
    writeUsageError(name, usage, io, e instanceof Error ? e.message : String(e));
    return undefined;
  }
}

/**
 * Runs one CLI command body and maps its errors to exit codes, the same way for every command:
 * 2 for usage, 1 for a refusal, anything else propagates.
 */
export async function runCommand(
  name: string,
  usage: string,
  io: CliIO,
  body: () => Promise<number>,
): Promise<number> {
  try {
    return await body();
  } catch (e) {
    if (e instanceof UsageError) {
      writeUsageError(name, usage, io, e.message);
      return 2;
    }
    if (e instanceof CommandError) {
      io.err(`manifold ${name}: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}

/** Loads a config file, or reports every problem on `io` and returns undefined (exit 2). */
export function loadOrReport(path: string, io: CliIO): ReturnType<typeof loadConfigFile> | undefined {
  try {
    return loadConfigFile(path);
  } catch (e) {
    if (e instanceof ConfigLoadError) {
      io.err(`${e.message}\n`);
      return undefined;
    }
    throw e;
  }
}
