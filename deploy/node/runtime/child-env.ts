/**
 * What a stdio upstream inherits from the gateway's environment when its config does not say:
 * the few variables a program needs to find itself (the same set as the MCP SDK's stdio client,
 * itself after sudo's defaults), never the gateway's own secrets. Its `env` is added on top.
 */
const INHERITED =
  process.platform === 'win32'
    ? [
        'APPDATA',
        'HOMEDRIVE',
        'HOMEPATH',
        'LOCALAPPDATA',
        'PATH',
        'PROCESSOR_ARCHITECTURE',
        'SYSTEMDRIVE',
        'SYSTEMROOT',
        'TEMP',
        'USERNAME',
        'USERPROFILE',
        'PROGRAMFILES',
      ]
    : ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER'];

/**
 * The inherited part of a child's environment. A value that starts with `()` is a shell function
 * export (the Shellshock vector), and is never passed on.
 *
 * @example
 * spawn(cmd, args, { env: { ...inheritedEnvironment(), ...spec.env } });
 */
export function inheritedEnvironment(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of INHERITED) {
    const value = process.env[key];
    if (value !== undefined && !value.startsWith('()')) env[key] = value;
  }
  return env;
}
