/** Server names and prefixes: the rules they must follow, and a valid name close to a bad one. */
import { MAX_NAME_LENGTH, RESERVED_NAME } from './defaults.js';

const NAME_CHARS = /^[A-Za-z0-9_-]+$/;

/** Every rule a server name (or a string prefix) breaks; empty when it is valid. */
export function nameProblems(name: string, what: 'server name' | 'prefix'): string[] {
  const problems: string[] = [];
  if (name.length === 0) return [`${what} must not be empty`];
  if (name.length > MAX_NAME_LENGTH) {
    problems.push(`${what} is ${name.length} characters long; the limit is ${MAX_NAME_LENGTH}`);
  }
  if (!NAME_CHARS.test(name)) problems.push(`${what} may only contain letters, digits, "_" and "-"`);
  if (name.includes('__')) {
    problems.push(`${what} must not contain "__" (it separates the prefix from the tool name)`);
  }
  if (name.toLowerCase() === RESERVED_NAME) {
    problems.push(`"${RESERVED_NAME}" is reserved for the gateway's own tools`);
  }
  return problems;
}

/** A valid name close to `name`, for fix sentences. */
export function suggestName(name: string): string {
  let s = name
    .replace(/[^A-Za-z0-9_-]/g, '-')
    .replace(/_{2,}/g, '_')
    .replace(/-{2,}/g, '-')
    .replace(/^[-_]+|[-_]+$/g, '')
    .slice(0, MAX_NAME_LENGTH)
    .replace(/[-_]+$/, '');
  if (s === '') s = 'server';
  if (s.toLowerCase() === RESERVED_NAME) s = `${s}-upstream`;
  return s;
}
