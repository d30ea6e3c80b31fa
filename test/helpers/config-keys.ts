/**
 * Every key list the config loader checks unknown keys against (`*_KEYS` in src/config), by its
 * name: what the docs must name, and what the config fuzz builds objects from.
 */
import * as frontDoor from '../../src/config/front-door.js';
import * as overrides from '../../src/config/overrides.js';
import * as policy from '../../src/config/policy.js';
import * as sandbox from '../../src/config/sandbox.js';
import * as schema from '../../src/config/schema.js';

export const CONFIG_KEY_LISTS: ReadonlyMap<string, readonly string[]> = new Map(
  Object.entries({ ...schema, ...frontDoor, ...policy, ...sandbox, ...overrides })
    .filter(([name, value]) => name.endsWith('_KEYS') && Array.isArray(value))
    .map(([name, value]) => [name, value as string[]]),
);
