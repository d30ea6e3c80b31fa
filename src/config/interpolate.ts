/**
 * `${VAR}` substitution in config string values. `$${` is an escape that yields a literal `${`.
 * Problems never quote the string being interpolated: it may hold a literal secret, and the
 * substituted values are secrets by definition.
 */
import type { ConfigIssue } from './types.js';

const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export type Env = Record<string, string | undefined>;

export interface InterpolationProblem {
  message: string;
  fix: string;
}

export interface StringInterpolation {
  value: string;
  /** Non-empty values that were substituted, in order of appearance. */
  secrets: string[];
  /** True when at least one `${VAR}` was replaced. */
  substituted: boolean;
  problems: InterpolationProblem[];
}

function malformed(body: string, position: number): InterpolationProblem {
  const envForm = /^env:([A-Za-z_][A-Za-z0-9_]*)$/.exec(body);
  if (envForm) {
    return {
      message: `unsupported variable reference at character ${position}: VS Code's \${env:NAME} form`,
      fix: `write \${${envForm[1]}} instead`,
    };
  }
  if (body.startsWith('input:')) {
    return {
      message: `unsupported variable reference at character ${position}: VS Code input variables are not supported`,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
      fix: 'pass the value through an environment variable and write ${NAME}',
    };
  }
  if (/^[A-Za-z_][A-Za-z0-9_]*:/.test(body)) {
    return {
      message: `unsupported variable reference at character ${position}: defaults and modifiers such as \${NAME:-value} are not supported`,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
      fix: 'set the variable in the environment and write ${NAME}, or write the value directly',
    };
  }
  return {
    message: `malformed variable reference at character ${position}: expected \${NAME} where NAME is letters, digits and "_", not starting with a digit`,
    fix: 'correct the reference, or write $${ for a literal ${',
  };
}

/** Substitutes every `${VAR}` in `input` from `env`. */
export function interpolateString(input: string, env: Env): StringInterpolation {
  const secrets: string[] = [];
  const problems: InterpolationProblem[] = [];
  const reported = new Set<string>();
  const problem = (p: InterpolationProblem) => {
    if (reported.has(p.message)) return;
    reported.add(p.message);
    problems.push(p);
  };
  let substituted = false;
  let out = '';
  let i = 0;
  while (i < input.length) {
    if (input.startsWith('$${', i)) {
      out += '${';
      i += 3;
      continue;
    }
    if (input.startsWith('${', i)) {
      const end = input.indexOf('}', i + 2);
      if (end === -1) {
        problem({
          message: `unterminated variable reference at character ${i + 1}: "\${" has no closing "}"`,
          // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
          fix: 'close the reference as ${NAME}, or write $${ for a literal ${',
        });
        break;
      }
      const name = input.slice(i + 2, end);
      if (!VAR_NAME.test(name)) {
        problem(malformed(name, i + 1));
      } else {
        const value = Object.hasOwn(env, name) ? env[name] : undefined;
        if (value === undefined) {
          problem({
            message: `environment variable ${name} is not set`,
            fix: `set ${name} in the gateway's environment, or write $\${${name}} for a literal "\${${name}}"`,
          });
        } else {
          out += value;
          substituted = true;
          if (value !== '') secrets.push(value);
        }
      }
      i = end + 1;
      continue;
    }
    out += input[i];
    i += 1;
  }
  return { value: out, secrets, substituted, problems };
}

/** Collects what interpolation over many values found. */
export class Interpolator {
  /** Formatted paths whose value came, at least partly, from an environment variable. */
  readonly tainted = new Set<string>();
  private readonly secretSet = new Set<string>();

  /** Problems go straight into `errors`, so they keep their place among the other findings. */
  constructor(
    private readonly env: Env,
    private readonly errors: ConfigIssue[],
  ) {}

  get secrets(): string[] {
    return [...this.secretSet];
  }

  /** Interpolates one string found at `path` (already formatted). */
  string(value: string, path: string): string {
    const result = interpolateString(value, this.env);
    for (const p of result.problems) this.errors.push({ path, message: p.message, fix: p.fix });
    for (const s of result.secrets) this.secretSet.add(s);
    if (result.substituted) this.tainted.add(path);
    return result.value;
  }
}
