/**
 * Wording for the fields of the catalog policies (#14, #17): risk classes and approval per
 * server, the catalog mode, and profiles; plus the helpers every field table shares. Nothing here
 * ever echoes a value.
 */

export interface FieldText {
  expected: string;
  fix: string;
}

export const positive = (unit: string, example: number): FieldText => ({
  expected: `a positive integer (${unit})`,
  fix: `write a whole number without quotes, e.g. ${example}`,
});

export const BUDGET_TEXT: FieldText = {
  expected: 'a positive integer (tokens) or "off"',
  fix: 'write budgetTokens as a whole number without quotes, e.g. 20000, or "off" to inline every schema',
};

/** The texts of a `catalog` object, under `gateway.catalog` or a profile's `catalog`. */
export function catalogText(base: string): Record<string, FieldText> {
  return {
    [base]: {
      expected: 'an object with "mode", "maxTools", "pin" and/or "searchLimit"',
      fix: 'write catalog as {"mode": "search", "pin": ["github__get_me"]}',
    },
    [`${base}.mode`]: {
      expected: '"full", "search" or "code"',
      fix: 'write "full" (list every tool, the default), "search" (list the search, call and describe meta-tools and the pinned tools) or "code" (list manifold__run_code, search, describe and the pinned tools)',
    },
    [`${base}.maxTools`]: positive('tools', 128),
    [`${base}.pin`]: {
      expected: 'an array of globs over exposed tool names',
      fix: 'write pin as ["github__get_me", "docs__*"]',
    },
    [`${base}.pin[]`]: { expected: 'a non-empty glob string', fix: 'write an exposed tool name or a glob' },
    [`${base}.searchLimit`]: {
      expected: 'an integer from 1 to 50',
      fix: 'write how many tools one search may return, e.g. 10 (the default)',
    },
  };
}

/** A server's risk, trust, approval and resend settings (#14). */
export const POLICY_SERVER_TEXT: Record<string, FieldText> = {
  risk: {
    expected:
      'an object that maps tool names or globs to "read", "write", "network", "execute" or "destructive"',
    fix: 'write risk as {"get_*": "read", "delete_*": "destructive"}; the first glob that matches a tool decides',
  },
  'risk.*': {
    expected: '"read", "write", "network", "execute" or "destructive"',
    fix: 'classify the tools this glob matches as one of read, write, network, execute or destructive',
  },
  trustAnnotations: {
    expected: 'true or false',
    fix: "write true to let readOnlyHint and destructiveHint classify this server's tools, or false (the default) to ignore them",
  },
  approval: {
    expected:
      '"off", "standard", "strict", an array of tool globs or risk:<class>, or an object with preset, ask, deny, allow, timeoutSeconds, via, queueTtlSeconds and notify',
    fix: 'write approval as "standard", as ["delete_*", "risk:destructive"], or as {"preset": "strict", "deny": ["drop_*"], "timeoutSeconds": 120}',
  },
  'approval[]': {
    expected: 'a non-empty tool glob, or risk:<class>',
    fix: 'write an upstream tool name or glob such as "delete_*", or a class such as "risk:destructive"',
  },
  'approval.preset': {
    expected: '"off", "standard" or "strict"',
    fix: 'write "standard" (ask before network, execute, destructive and undeclared tools) or "strict" (also ask before writes, and refuse destructive tools)',
  },
  'approval.ask': {
    expected: 'an array of tool globs or risk:<class>',
    fix: 'write e.g. ["send_*", "risk:execute"]',
  },
  'approval.ask[]': {
    expected: 'a non-empty tool glob, or risk:<class>',
    fix: 'write e.g. "send_*" or "risk:execute"',
  },
  'approval.deny': {
    expected: 'an array of tool globs or risk:<class>',
    fix: 'write e.g. ["drop_*", "risk:destructive"]',
  },
  'approval.deny[]': {
    expected: 'a non-empty tool glob, or risk:<class>',
    fix: 'write e.g. "drop_*" or "risk:destructive"',
  },
  'approval.allow': {
    expected: 'an array of tool globs or risk:<class>',
    fix: 'write e.g. ["get_*", "risk:read"]',
  },
  'approval.allow[]': {
    expected: 'a non-empty tool glob, or risk:<class>',
    fix: 'write e.g. "get_*" or "risk:read"',
  },
  'approval.timeoutSeconds': {
    expected: 'an integer from 1 to 3600 (seconds)',
    fix: 'write how long a person has to answer, e.g. 120 (the default)',
  },
  // #52: the approvals queue.
  'approval.via': {
    expected: '"client", "queue" or "client-then-queue"',
    fix: 'write "client" (ask the calling client\'s user, the default), "queue" (an operator decides) or "client-then-queue" (the client when it can answer, else the queue)',
  },
  'approval.queueTtlSeconds': {
    expected: 'an integer from 60 to 2592000 (seconds)',
    fix: 'write how long a queued approval waits for an operator, e.g. 86400 (one day, the default)',
  },
  'approval.notify': {
    expected: 'an absolute http(s) URL',
    fix: 'write the webhook that receives each queued approval, e.g. "https://chat.example.com/hooks/approvals"',
  },
  retry: {
    expected: 'an integer from 0 to 5',
    fix: 'write how many times a call may be resent when that is safe (a read tool, or a session the server did not know), e.g. 1 (the default); 0 never resends',
  },
};

/** One entry of the top-level `profiles` map (#17). */
export const PROFILE_TEXT: Record<string, FieldText> = {
  servers: {
    expected: 'an array of server names',
    fix: 'write servers as ["github", "docs"]: the servers this profile shows',
  },
  'servers[]': { expected: 'a server name', fix: 'write the name of a server under mcpServers' },
  tools: {
    expected: 'an array of globs over exposed tool names',
    fix: 'write tools as ["github__*_issue*", "docs__search"]',
  },
  'tools[]': { expected: 'a non-empty glob string', fix: 'write an exposed tool name or a glob' },
  budgetTokens: BUDGET_TEXT,
  ...catalogText('catalog'),
};
