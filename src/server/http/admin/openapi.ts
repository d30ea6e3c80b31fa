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
