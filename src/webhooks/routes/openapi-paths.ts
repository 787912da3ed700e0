import { WEBHOOK_EVENT_TYPES } from '../../events/schema.js';

/**
 * The OpenAPI paths of the webhook routes (eventcallbackurl.ts, webhook-admin.ts), added to the
 * read API's document by the composition root. Their input is checked by hand-written rules
 * (callback-url-input.ts, replay-webhooks.ts, webhook-attempts.ts), so the schemas are written
 * here, next to the routes they describe.
 */

const json = (schema: Record<string, unknown>) => ({ 'application/json': { schema } });
const ERROR = json({ $ref: '#/components/schemas/Error' });
const errors = (codes: readonly number[]) => Object.fromEntries(codes.map((c) => [String(c), { description: ERROR_TEXT[c] ?? 'Error', content: ERROR }]));
const ERROR_TEXT: Record<number, string> = {
  400: 'Invalid input (the message names it)',
  401: 'Bad or missing credentials',
  403: 'A read-only key cannot write',
  404: 'Unknown id',
  429: 'Over the rate limit (see Retry-After)',
};
const envelope = (item: Record<string, unknown>) => ({
  type: 'object',
  properties: { Count: { type: 'integer' }, Data: { type: 'array', items: item }, Total: { type: 'integer' } },
  required: ['Count', 'Data', 'Total'],
});
const paging = [
  { name: 'Limit', in: 'query', schema: { type: 'integer', minimum: 0, maximum: 1000 }, description: 'Default 10; 0 means 1000' },
  { name: 'Offset', in: 'query', schema: { type: 'integer', minimum: 0 } },
  { name: 'countOnly', in: 'query', schema: { type: 'boolean' } },
];

const EVENT_TYPE = {
  description: `One of ${WEBHOOK_EVENT_TYPES.join(', ')}, or node-mailjet's number 1-7`,
  oneOf: [{ type: 'string', enum: [...WEBHOOK_EVENT_TYPES] }, { type: 'integer', minimum: 1, maximum: 7 }],
};

const CALLBACK_URL = {
  type: 'object',
  properties: {
    ID: { type: 'integer' },
    APIKeyID: { type: 'integer' },
    EventType: { type: 'string', enum: [...WEBHOOK_EVENT_TYPES] },
    IsBackup: { type: 'boolean' },
    Status: { type: 'string', enum: ['alive', 'dead'] },
    Url: { type: 'string', format: 'uri' },
    Version: { type: 'integer', enum: [1, 2] },
  },
  required: ['ID', 'APIKeyID', 'EventType', 'IsBackup', 'Status', 'Url', 'Version'],
};

const CALLBACK_URL_INPUT = {
  type: 'object',
  description: 'Property names match without regard to case; numbers and booleans may also be strings.',
  properties: {
    EventType: EVENT_TYPE,
    Url: { type: 'string', format: 'uri', description: 'Absolute http(s) URL with a path beyond "/"; may carry user:password@ (sent as Basic auth)' },
    IsBackup: { type: 'boolean', default: false },
    Status: { type: 'string', enum: ['alive', 'dead'], default: 'alive' },
    Version: { type: 'integer', enum: [1, 2], default: 1, description: '1: one event per POST; 2: arrays of the events of up to one second' },
  },
};

const ATTEMPT = {
  type: 'object',
  properties: {
    ID: { type: 'integer' },
    AttemptedAt: { type: 'string', format: 'date-time' },
    CallbackUrlID: { type: 'integer' },
    DeliveryID: { type: 'integer' },
    WebhookID: { type: 'string', description: 'The webhook-id header: the same on every attempt of a delivery' },
    Attempt: { type: 'integer' },
    EventCount: { type: 'integer' },
    Outcome: { type: 'string', enum: ['delivered', 'failed', 'expired', 'dropped'] },
    StatusCode: { type: ['integer', 'null'] },
    LatencyMs: { type: 'integer' },
    ErrorClass: { type: ['string', 'null'] },
    ResponseSnippet: { type: ['string', 'null'] },
  },
};

const ID_PARAM = { name: 'id', in: 'path', required: true, description: 'The ID, or the unique key EventType|Backup (`open`, `open|true` for the backup)', schema: { type: 'string', pattern: '^([0-9]+|[A-Za-z]+(\\|(true|false|1|0))?)$' } };
const TAGS = ['webhooks'];

export const WEBHOOK_OPENAPI_PATHS: Record<string, unknown> = {
  '/v3/REST/eventcallbackurl': {
    get: {
      tags: TAGS,
      summary: "The key's event callback URLs",
      parameters: [
        { name: 'EventType', in: 'query', schema: EVENT_TYPE },
        { name: 'Status', in: 'query', schema: { type: 'string', enum: ['alive', 'dead'] } },
        { name: 'Backup', in: 'query', schema: { type: 'boolean' } },
        { name: 'Version', in: 'query', schema: { type: 'integer', enum: [1, 2] } },
        { name: 'APIKey', in: 'query', description: "The key's own id (another key's matches nothing)", schema: { type: 'integer' } },
        { name: 'Sort', in: 'query', schema: { type: 'string', enum: ['ID', 'ID DESC'] } },
        ...paging,
      ],
      responses: { '200': { description: 'The URLs', content: json(envelope(CALLBACK_URL)) }, ...errors([400, 401, 429]) },
    },
    post: {
      tags: TAGS,
      summary: 'Add a callback URL (one primary and one backup per event type)',
      requestBody: { required: true, content: json({ ...CALLBACK_URL_INPUT, required: ['EventType', 'Url'] }) },
      responses: {
        '201': {
          description: 'The new URL, with its Standard Webhooks signing secret (shown this once)',
          content: json(envelope({ ...CALLBACK_URL, properties: { ...CALLBACK_URL.properties, SigningSecret: { type: 'string' } } })),
        },
        ...errors([400, 401, 403, 429]),
      },
    },
  },
  '/v3/REST/eventcallbackurl/{id}': {
    get: { tags: TAGS, summary: 'One callback URL', parameters: [ID_PARAM], responses: { '200': { description: 'The URL', content: json(envelope(CALLBACK_URL)) }, ...errors([400, 401, 404, 429]) } },
    put: {
      tags: TAGS,
      summary: 'Change the properties given (a new Url revives a dead URL)',
      parameters: [ID_PARAM],
      requestBody: { content: json(CALLBACK_URL_INPUT) },
      responses: { '200': { description: 'The URL as changed', content: json(envelope(CALLBACK_URL)) }, ...errors([400, 401, 403, 404, 429]) },
    },
    delete: { tags: TAGS, summary: 'Remove a callback URL', parameters: [ID_PARAM], responses: { '204': { description: 'Removed' }, ...errors([400, 401, 403, 404, 429]) } },
  },
  '/v1/webhooks/attempts': {
    get: {
      tags: TAGS,
      summary: "Every delivery attempt to the key's URLs, newest first",
      parameters: [
        { name: 'CallbackUrlID', in: 'query', schema: { type: 'integer' } },
        { name: 'Outcome', in: 'query', schema: { type: 'string', enum: ['delivered', 'failed', 'expired', 'dropped'] } },
        { name: 'WebhookID', in: 'query', schema: { type: 'string' } },
        { name: 'FromTS', in: 'query', schema: { type: 'string' }, description: 'Unix seconds or RFC 3339' },
        { name: 'ToTS', in: 'query', schema: { type: 'string' }, description: 'Unix seconds or RFC 3339' },
        ...paging,
      ],
      responses: { '200': { description: 'The attempts', content: json(envelope(ATTEMPT)) }, ...errors([400, 401, 429]) },
    },
  },
  '/v1/webhooks/replay': {
    post: {
      tags: TAGS,
      summary: "Send a range of the key's events to its URLs again",
      requestBody: {
        required: true,
        content: json({
          type: 'object',
          description: 'FromPosition or FromTS is required',
          properties: {
            FromPosition: { type: 'integer' },
            ToPosition: { type: 'integer' },
            FromTS: { type: 'string', description: 'Unix seconds or RFC 3339' },
            ToTS: { type: 'string', description: 'Unix seconds or RFC 3339' },
            EventType: EVENT_TYPE,
          },
        }),
      },
      responses: {
        '202': {
          description: 'Queued; NextPosition says where to continue when the range was cut',
          content: json({ type: 'object', properties: { Events: { type: 'integer' }, Deliveries: { type: 'integer' }, NextPosition: { type: ['integer', 'null'] } } }),
        },
        ...errors([400, 401, 403, 429]),
      },
    },
  },
};
