/**
 * The MCP Registry's `server.json` and its `/v0.1/servers` answers (modelcontextprotocol/registry,
 * docs/reference/api/openapi.yaml: ServerDetail, ServerResponse, ServerList), as far as Manifold
 * reads them. Entries come from the network: they are checked with zod, never trusted by shape, and
 * unknown fields are kept as they are (the format grows).
 */
import * as z from 'zod/v4-mini';

const text = () => z.string().check(z.minLength(1));

/** An input (argument, environment variable, header), with its `{variables}`. */
const input = {
  description: z.optional(z.string()),
  isRequired: z.optional(z.boolean()),
  isSecret: z.optional(z.boolean()),
  value: z.optional(z.string()),
  default: z.optional(z.string()),
  format: z.optional(z.string()),
  choices: z.optional(z.array(z.string())),
};
const plainInput = z.looseObject(input);
const withVariables = { ...input, variables: z.optional(z.record(z.string(), plainInput)) };

export const keyValueInput = z.looseObject({ ...withVariables, name: text() });
export const argument = z.looseObject({
  ...withVariables,
  type: z.enum(['positional', 'named']),
  name: z.optional(z.string()),
  valueHint: z.optional(z.string()),
  isRepeated: z.optional(z.boolean()),
});

const transport = z.looseObject({
  type: text(),
  url: z.optional(z.string()),
  headers: z.optional(z.array(keyValueInput)),
  variables: z.optional(z.record(z.string(), plainInput)),
});

export const packageSchema = z.looseObject({
  registryType: text(),
  registryBaseUrl: z.optional(z.string()),
  identifier: text(),
  version: z.optional(z.string()),
  runtimeHint: z.optional(z.string()),
  transport: z.optional(transport),
  runtimeArguments: z.optional(z.array(argument)),
  packageArguments: z.optional(z.array(argument)),
  environmentVariables: z.optional(z.array(keyValueInput)),
});

export const serverDetail = z.looseObject({
  name: z.string().check(z.regex(/^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._-]+$/)),
  description: z.optional(z.string()),
  title: z.optional(z.string()),
  version: text(),
  websiteUrl: z.optional(z.string()),
  repository: z.optional(z.looseObject({ url: z.optional(z.string()), source: z.optional(z.string()) })),
  packages: z.optional(z.array(packageSchema)),
  remotes: z.optional(z.array(transport)),
});

export const serverResponse = z.looseObject({
  server: serverDetail,
  _meta: z.optional(z.record(z.string(), z.unknown())),
});

export const serverList = z.looseObject({
  servers: z.array(z.unknown()),
  metadata: z.optional(
    z.looseObject({ nextCursor: z.optional(z.nullable(z.string())), count: z.optional(z.number()) }),
  ),
});

export type KeyValueInput = z.infer<typeof keyValueInput>;
export type Argument = z.infer<typeof argument>;
export type Package = z.infer<typeof packageSchema>;
export type Transport = z.infer<typeof transport>;
export type ServerDetail = z.infer<typeof serverDetail>;
export type ServerResponse = z.infer<typeof serverResponse>;

/** The official registry's own metadata key in a ServerResponse's `_meta`. */
export const OFFICIAL_META = 'io.modelcontextprotocol.registry/official';

/** The first problem zod found, as "path: message", for an error that names what is wrong. */
export function firstProblem(error: z.core.$ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'it does not match the registry format';
  const path = issue.path.map(String).join('.');
  return `${path || 'the entry'}: ${issue.message}`;
}
