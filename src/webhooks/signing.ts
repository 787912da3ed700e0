import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
 * `<webhook-id>.<webhook-timestamp>.<body>` with the URL's secret, sent as
 * `webhook-signature: v1,<base64>`. Secrets are `whsec_` + base64 of 24 random bytes.
 */

const PREFIX = 'whsec_';

export function generateSigningSecret(): string {
  return `${PREFIX}${randomBytes(24).toString('base64')}`;
}

/** The raw key bytes of a `whsec_…` secret. */
export function signingKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
}

export function sign(key: Buffer, webhookId: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', key).update(`${webhookId}.${timestampSeconds}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

export interface SignatureHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

export function signatureHeaders(key: Buffer, webhookId: string, body: string, now: Date = new Date()): SignatureHeaders {
  const timestamp = Math.floor(now.getTime() / 1000);
  return { 'webhook-id': webhookId, 'webhook-timestamp': String(timestamp), 'webhook-signature': sign(key, webhookId, timestamp, body) };
}
