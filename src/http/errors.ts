/**
 * The one catalogue of errors that cross HTTP. They leave as Mailjet's envelope:
 * {"ErrorInfo":"","ErrorMessage":"…","StatusCode":N}.
 */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

const AUTH_FAILURE_MESSAGE =
  'API key authentication/authorization failure. You may be unauthorized to access the API or your API key may be expired. Visit API keys management section to check your keys.';

export const apiErrors = {
  badRequest: (message: string) => new ApiError(400, message),
  unauthorized: () => new ApiError(401, AUTH_FAILURE_MESSAGE, { 'WWW-Authenticate': 'Basic realm="mailtally"' }),
  forbidden: (message = 'This API key is read-only: it may not create, change or delete anything.') => new ApiError(403, message),
  notFound: (message = 'Object not found') => new ApiError(404, message),
  methodNotAllowed: (method: string, allowed: readonly string[]) =>
    new ApiError(405, `Method ${method} is not allowed on this resource; use ${allowed.join(', ')}`, { Allow: allowed.join(', ') }),
  tooManyRequests: (retryAfterSeconds: number, message = 'Too many requests for this API key; slow down and retry later') =>
    new ApiError(429, message, { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) }),
  payloadTooLarge: () => new ApiError(413, 'Request body is too large'),
  unsupportedMediaType: () => new ApiError(415, 'Content-Type is not supported; send application/json'),
  /** RFC 9110 §15.5.16: a content coding the server does not take is a 415 naming the ones it does. */
  unsupportedEncoding: (coding: string) =>
    new ApiError(415, `Content-Encoding ${JSON.stringify(coding)} is not supported; send the body uncompressed`, { 'Accept-Encoding': 'identity' }),
  unavailable: (message = 'The service is temporarily unavailable; retry shortly') => new ApiError(503, message, { 'Retry-After': '1' }),
  internal: () => new ApiError(500, 'Internal server error'),
} as const;

export interface ErrorEnvelope {
  ErrorInfo: string;
  ErrorMessage: string;
  StatusCode: number;
}

export const envelope = (statusCode: number, message: string): ErrorEnvelope => ({
  ErrorInfo: '',
  ErrorMessage: message,
  StatusCode: statusCode,
});
