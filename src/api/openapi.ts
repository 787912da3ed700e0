import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { REST_PREFIX } from './register.js';
import type { Resource } from './resource.js';
import { RESOURCES } from './routes/index.js';

/**
 * The OpenAPI 3.1 document, generated from the resources' zod schemas (the same ones that
 * validate requests), served at /openapi.json and as a browsable page at /docs.
 */

type JsonSchema = Record<string, unknown>;

const ERROR = {
  type: 'object',
  properties: { ErrorInfo: { type: 'string' }, ErrorMessage: { type: 'string' }, StatusCode: { type: 'integer' } },
  required: ['ErrorInfo', 'ErrorMessage', 'StatusCode'],
};

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

function queryParameters(query: z.ZodObject): JsonSchema[] {
  const properties = (jsonSchema(query, 'input')['properties'] ?? {}) as Record<string, JsonSchema>;
  return Object.entries(properties).map(([name, schema]) => {
    const { description, ...rest } = schema;
    return { name, in: 'query', required: false, schema: rest, ...(typeof description === 'string' ? { description } : {}) };
  });
}

const errorResponses = (codes: readonly number[]) =>
  Object.fromEntries(codes.map((c) => [String(c), { description: ERROR_TEXT[c] ?? 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } }]));

const ERROR_TEXT: Record<number, string> = {
  400: 'Bad parameter (the message names it)',
  401: 'Bad or missing credentials',
  404: 'Unknown id or resource',
  405: 'Method not allowed',
  429: 'Over the rate limit (see Retry-After)',
};

function envelope(record: JsonSchema): JsonSchema {
  return {
    type: 'object',
    properties: { Count: { type: 'integer' }, Data: { type: 'array', items: record }, Total: { type: 'integer', description: 'All matching records' } },
    required: ['Count', 'Data', 'Total'],
  };
}

export function openApiDocument(resources: readonly Resource[] = RESOURCES): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = { Error: ERROR };
  for (const r of resources) {
    const schemaName = r.name.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase());
    schemas[schemaName] = jsonSchema(r.record, 'output');
    const ok = { description: 'The records, in the {Count, Data, Total} envelope', content: { 'application/json': { schema: envelope({ $ref: `#/components/schemas/${schemaName}` }) } } };
    paths[`${REST_PREFIX}/${r.name}`] = {
      get: { tags: ['statistics'], summary: r.description, parameters: queryParameters(r.query), responses: { '200': ok, ...errorResponses([400, 401, 405, 429]) } },
    };
    for (const item of r.items ?? []) {
      const path = item.path.replace(/:(\w+)/g, '{$1}');
      const params = [
        ...[...item.path.matchAll(/:(\w+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } })),
        ...(item.query === undefined ? [] : queryParameters(item.query)),
      ];
      paths[`${REST_PREFIX}/${r.name}/${path}`] = {
        get: { tags: ['statistics'], summary: item.description, parameters: params, responses: { '200': ok, ...errorResponses([400, 401, 404, 405, 429]) } },
      };
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'mailtally',
      version: '3',
      description:
        "Mailjet Email API v3 statistics, message events and event callback URLs, served from mailtally's read models. " +
        'Names of resources and query parameters match without regard to case; 64-bit ids are bare JSON integers.',
    },
    servers: [{ url: '/' }],
    security: [{ basic: [] }],
    components: { securitySchemes: { basic: { type: 'http', scheme: 'basic', description: 'API key as user name, secret key as password' } }, schemas },
    paths,
  };
}

export async function registerOpenApi(app: FastifyInstance, extraPaths: Record<string, unknown> = {}): Promise<void> {
  const document = openApiDocument();
  document['paths'] = { ...(document['paths'] as Record<string, unknown>), ...extraPaths };
  await app.register(swagger, { mode: 'static', specification: { document: document as never } });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => document);
}
