/**
 * The admin API's OpenAPI 3.1 document (#52), served at `/admin/openapi.json`: what a Terraform
 * provider, a script or the contract tests (test/e2e/admin-api.test.ts) read. Written here by hand,
 * next to the routes it describes, since the routes are plain Hono handlers; the contract tests
 * validate every response of every route against it, so the two cannot drift apart unnoticed.
 * Static: it holds no data, so it is served to anyone the Origin/Host guard lets through.
 */
import type { Hono } from 'hono';
import type { AdminContext } from './context.js';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});
const error = (description: string) => json(ref('Error'), description);
const body = (schema: unknown) => ({ required: true, content: { 'application/json': { schema } } });
const pathName = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});
/** The answers every admin route may give besides its own. */
const common = {
  '401': error('No token, or one that does not verify.'),
  '403': error(
    'The token lacks manifold:admin, or the gateway has no admin API (no auth on a non-loopback bind).',
  ),
};

const time = { type: 'string', format: 'date-time' };
const dryRunParam = {
  name: 'dryRun',
  in: 'query',
  required: false,
  description: '1: check and diff only, apply nothing.',
  schema: { enum: ['1', 'true'] },
};

export const ADMIN_OPENAPI = {
  openapi: '3.1.0',
  info: {
    title: 'Manifold admin API',
    version: '1',
    description:
      'Manage a Manifold MCP gateway: drift review, the approvals queue, servers, audit and tokens. Every route needs a bearer token with the manifold:admin scope; every change is an audit line naming who made it.',
  },
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
    schemas: {
      Error: {
        type: 'object',
        description: 'A refusal, in words; 401 and 403 come as a JSON-RPC error object instead.',
        properties: { error: {} },
        required: ['error'],
      },
      Approval: {
        type: 'object',
        additionalProperties: false,
        required: [
          'id',
          'status',
          'tenant',
          'subject',
          'server',
          'tool',
          'risk',
          'arguments',
          'createdAt',
          'expiresAt',
        ],
        properties: {
          id: { type: 'string' },
          status: { enum: ['pending', 'approved', 'declined', 'running', 'done', 'expired'] },
          tenant: { type: 'string' },
          subject: { type: 'string' },
          server: { type: 'string' },
          tool: { type: 'string', description: 'The exposed tool name.' },
          risk: { type: 'string' },
          arguments: {
            type: 'string',
            description: 'The arguments as JSON text, bounded, secrets redacted.',
          },
          createdAt: time,
          expiresAt: time,
          decidedBy: { type: 'string' },
          decidedAt: time,
          reason: { type: 'string' },
        },
      },
      ApprovalList: {
        type: 'object',
        additionalProperties: false,
        required: ['approvals'],
        properties: { approvals: { type: 'array', items: ref('Approval') } },
      },
      Decision: {
        type: 'object',
        additionalProperties: false,
        required: ['decision'],
        properties: {
          decision: { enum: ['approve', 'decline'] },
          reason: { type: 'string', maxLength: 500 },
        },
      },
      DriftReview: {
        type: 'object',
        additionalProperties: false,
        required: ['server', 'identityChanged', 'changes', 'lines', 'digest'],
        properties: {
          server: { type: 'string' },
          tool: { type: 'string' },
          identityChanged: { type: 'boolean' },
          changes: { type: 'integer', minimum: 0 },
          lines: { type: 'array', items: { type: 'string' } },
          digest: { type: 'string' },
        },
      },
      DriftHistory: {
        type: 'object',
        additionalProperties: false,
        required: ['server', 'history'],
        properties: {
          server: { type: 'string' },
          tool: { type: 'string' },
          history: {
            type: 'array',
            description: 'The newest first.',
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['tool', 'kind', 'fingerprint', 'at'],
              properties: {
                tool: { type: 'string', description: "The upstream's own name of the item." },
                kind: {
                  enum: ['quarantined', 'withheld', 'accepted'],
                  description:
                    'quarantined: held back, changed since trusted; withheld: held back, never trusted; accepted: an operator accepted it.',
                },
                fingerprint: {
                  type: 'string',
                  description:
                    "The definition's fingerprint as listed or accepted; empty for an accepted removal.",
                },
                digest: {
                  type: 'string',
                  description: 'Accepted through the API: the digest of the review.',
                },
                by: { type: 'string', description: 'Accepted: who accepted it.' },
                at: time,
              },
            },
          },
        },
      },
      ConfigIssue: {
        type: 'object',
        additionalProperties: false,
        required: ['path', 'message'],
        properties: { path: { type: 'string' }, message: { type: 'string' }, fix: { type: 'string' } },
      },
      ServerDiff: {
        type: 'object',
        additionalProperties: false,
        required: ['change', 'fields'],
        properties: {
          change: { enum: ['added', 'replaced', 'retuned', 'unchanged', 'removed'] },
          fields: { type: 'array', items: { type: 'string' } },
        },
      },
      Server: {
        type: 'object',
        required: ['name', 'source', 'editable', 'transport', 'state', 'tools', 'disabled'],
        properties: {
          name: { type: 'string' },
          source: { enum: ['file', 'api'] },
          editable: { type: 'boolean' },
          transport: { enum: ['stdio', 'streamable-http', 'sse'] },
          state: { type: 'string' },
          era: { enum: ['legacy', 'modern'] },
          protocolVersion: { type: 'string' },
          tools: { type: 'integer', minimum: 0 },
          disabled: { type: 'boolean' },
          lastError: { type: 'string' },
          config: { type: 'object', description: 'The server as configured; header and env values hidden.' },
          updatedBy: { type: 'string' },
          updatedAt: time,
        },
      },
      ServerInput: {
        type: 'object',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
        description: 'A server entry exactly as in the config file; header values must be ${VAR} references.',
      },
      ServerChange: {
        type: 'object',
        required: ['errors', 'applied'],
        properties: {
          errors: { type: 'array', items: ref('ConfigIssue') },
          diff: ref('ServerDiff'),
          applied: { type: 'boolean' },
          server: { type: 'object' },
        },
      },
      Token: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'subject', 'tenant', 'expiresAt', 'firstSeen', 'revoked'],
        properties: {
          id: { type: 'string', description: 'The jti, or sha256:<digest> for a token without one.' },
          subject: { type: 'string' },
          tenant: { type: 'string' },
          expiresAt: time,
          firstSeen: time,
          revoked: { type: 'boolean' },
          revokedAt: time,
          revokedBy: { type: 'string' },
        },
      },
      AuditCall: {
        type: 'object',
        additionalProperties: false,
        required: [
          'at',
          'method',
          'tenant',
          'subject',
          'server',
          'tool',
          'verdict',
          'durationMs',
          'bytesIn',
          'bytesOut',
        ],
        properties: {
          at: time,
          method: { type: 'string' },
          tenant: { type: 'string' },
          subject: { type: 'string' },
          server: { type: ['string', 'null'] },
          tool: { type: ['string', 'null'] },
          verdict: { type: 'string' },
          durationMs: { type: 'number' },
          bytesIn: { type: 'integer' },
          bytesOut: { type: 'integer' },
          reason: { type: 'string' },
        },
      },
      Retrusted: {
        type: 'object',
        additionalProperties: false,
        required: ['retrusted', 'changes'],
        properties: { retrusted: { type: 'string' }, tool: { type: 'string' }, changes: { type: 'integer' } },
      },
    },
  },
  security: [{ bearer: [] }],
  paths: {
    '/admin/openapi.json': {
      get: {
        summary: 'This document.',
        security: [],
        responses: { '200': json({ type: 'object' }, 'The OpenAPI document.') },
      },
    },
    '/admin/servers': {
      get: {
        summary: 'Every running server, with where it comes from, its state and era.',
        responses: {
          '200': json(
            {
              type: 'object',
              required: ['servers'],
              properties: { servers: { type: 'array', items: ref('Server') } },
            },
            'The servers.',
          ),
          ...common,
        },
      },
      post: {
        summary: 'Adds a server, kept in the store and applied on every instance; ?dryRun=1 only checks it.',
        parameters: [dryRunParam],
        requestBody: body({
          type: 'object',
          required: ['name', 'config'],
          properties: { name: { type: 'string' }, config: ref('ServerInput') },
        }),
        responses: {
          '200': json(ref('ServerChange'), 'The dry run: the config errors, or the diff.'),
          '201': json(ref('ServerChange'), 'Added.'),
          '400': json(
            { oneOf: [ref('ServerChange'), ref('Error')] },
            'The config has errors (each with its path and fix), or the body is not {name, config}.',
          ),
          '409': error('A server of that name exists (or the file has one and is locked).'),
          ...common,
        },
      },
    },
    '/admin/servers/{name}': {
      get: {
        summary: 'One server, with its config (secrets hidden).',
        parameters: [pathName('name', 'The server.')],
        responses: { '200': json(ref('Server'), 'The server.'), '404': error('No such server.'), ...common },
      },
      put: {
        summary:
          'Changes a server kept in the store (or, when the file is editable, overrides a file server).',
        parameters: [pathName('name', 'The server.'), dryRunParam],
        requestBody: body({
          type: 'object',
          required: ['config'],
          properties: { config: ref('ServerInput') },
        }),
        responses: {
          '200': json(ref('ServerChange'), 'Changed, or the dry run.'),
          '400': json(
            { oneOf: [ref('ServerChange'), ref('Error')] },
            'The config has errors, or a bad body.',
          ),
          '404': error('No such server.'),
          '409': error('The server comes from the config file, which is locked.'),
          ...common,
        },
      },
      delete: {
        summary: 'Removes a server kept in the store.',
        parameters: [pathName('name', 'The server.'), dryRunParam],
        responses: {
          '200': json(ref('ServerChange'), 'Removed, or the dry run.'),
          '404': error('No such server.'),
          '409': error('The server comes from the config file.'),
          ...common,
        },
      },
    },
    '/admin/tokens': {
      get: {
        summary: 'Unexpired tokens the gateway has seen, newest first (ids, never tokens).',
        parameters: [
          {
            name: 'limit',
            in: 'query',
            required: false,
            schema: { type: 'integer', minimum: 1, maximum: 500 },
          },
        ],
        responses: {
          '200': json(
            {
              type: 'object',
              required: ['tokens'],
              properties: { tokens: { type: 'array', items: ref('Token') } },
            },
            'The tokens.',
          ),
          '400': error('A bad limit.'),
          ...common,
        },
      },
    },
    '/admin/tokens/{id}/revoke': {
      post: {
        summary: 'Refuses a token before its expiry, on every instance within seconds.',
        parameters: [pathName('id', 'The token id.')],
        responses: {
          '200': json(ref('Token'), 'Revoked.'),
          '404': error('No unexpired token of that id has been seen.'),
          '409': error('Revoked already.'),
          ...common,
        },
      },
    },
    '/admin/audit': {
      get: {
        summary: "This instance's recent audited requests, newest first.",
        parameters: ['tenant', 'server', 'tool', 'verdict']
          .map((name) => ({ name, in: 'query', required: false, schema: { type: 'string' } }))
          .concat([
            {
              name: 'limit',
              in: 'query',
              required: false,
              schema: { type: 'integer', minimum: 1, maximum: 1000 } as never,
            },
          ]),
        responses: {
          '200': json(
            {
              type: 'object',
              required: ['calls'],
              properties: { calls: { type: 'array', items: ref('AuditCall') } },
            },
            'The calls.',
          ),
          '400': error('A bad limit.'),
          '404': error('The audit query is off: gateway.statusPath is false.'),
          ...common,
        },
      },
    },
    '/admin/servers/{name}/drift': {
      get: {
        summary: 'What a server lists now against its trusted baseline, and the digest to accept it by.',
        parameters: [
          pathName('name', 'The server.'),
          { name: 'tool', in: 'query', required: false, schema: { type: 'string' } },
        ],
        responses: {
          '200': json(ref('DriftReview'), 'The review.'),
          '404': error('No such server, or no such tool.'),
          '503': error('The server is not connected now.'),
          ...common,
        },
      },
    },
    '/admin/servers/{name}/drift/history': {
      get: {
        summary:
          "A server's drift history, or one tool's: each time drift held it back, each accepted change.",
        parameters: [
          pathName('name', 'The server.'),
          { name: 'tool', in: 'query', required: false, schema: { type: 'string' } },
          {
            name: 'limit',
            in: 'query',
            required: false,
            schema: { type: 'integer', minimum: 1, maximum: 500 },
          },
        ],
        responses: {
          '200': json(ref('DriftHistory'), 'The events.'),
          '400': error('A bad limit.'),
          '404': error('No such server.'),
          ...common,
        },
      },
    },
    '/admin/servers/{name}/retrust': {
      post: {
        summary: 'Accepts exactly what the review with this digest showed.',
        parameters: [pathName('name', 'The server.')],
        requestBody: body({
          type: 'object',
          required: ['digest'],
          properties: { digest: { type: 'string' }, tool: { type: 'string' } },
        }),
        responses: {
          '200': json(ref('Retrusted'), 'The baseline was rewritten.'),
          '400': error('The body is not {"digest": ...}.'),
          '404': error('No such server, or no such tool.'),
          '409': json(
            {
              type: 'object',
              required: ['error', 'review'],
              properties: { error: { type: 'string' }, review: ref('DriftReview') },
            },
            'What the server lists changed since that review.',
          ),
          '503': error('The server is not connected now.'),
          ...common,
        },
      },
    },
    '/admin/approvals': {
      get: {
        summary: 'The approvals queue, newest first.',
        parameters: [
          {
            name: 'status',
            in: 'query',
            required: false,
            schema: { enum: ['pending', 'approved', 'declined', 'running', 'done', 'expired'] },
          },
          { name: 'tenant', in: 'query', required: false, schema: { type: 'string' } },
          {
            name: 'limit',
            in: 'query',
            required: false,
            schema: { type: 'integer', minimum: 1, maximum: 200 },
          },
        ],
        responses: {
          '200': json(ref('ApprovalList'), 'The approvals.'),
          '400': error('A bad filter.'),
          ...common,
        },
      },
    },
    '/admin/approvals/{id}': {
      get: {
        summary: 'One approval.',
        parameters: [pathName('id', 'The approval id.')],
        responses: {
          '200': json(ref('Approval'), 'The approval.'),
          '404': error('No such approval.'),
          ...common,
        },
      },
      post: {
        summary: 'Approves or declines a pending approval; a decision is final.',
        parameters: [pathName('id', 'The approval id.')],
        requestBody: body(ref('Decision')),
        responses: {
          '200': json(ref('Approval'), 'Decided.'),
          '400': error('The body is not a decision.'),
          '404': error('No such approval.'),
          '409': json(
            {
              type: 'object',
              required: ['error'],
              properties: { error: { type: 'string' }, approval: ref('Approval') },
            },
            'Already decided, or expired.',
          ),
          ...common,
        },
      },
    },
  } as Record<string, unknown>,
};

export function mountOpenApi(app: Hono, _ctx: AdminContext): void {
  app.get('/admin/openapi.json', (c) => c.json(ADMIN_OPENAPI));
}
