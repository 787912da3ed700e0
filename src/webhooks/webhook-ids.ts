import { randomUUID } from 'node:crypto';

/**
 * The `webhook-id` each delivery carries (Standard Webhooks), the same on every retry of it, for
 * receivers to dedupe by: a Version 1 delivery is one event's, `msg_<its log position>`, so a
 * replay of that event sends it under the same id; a Version 2 batch is `bat_<uuid>`, and its
 * events' positions are kept beside it (the outbox's and the attempts' `positions`).
 */
export const MESSAGE_ID_PREFIX = 'msg_';
export const BATCH_ID_PREFIX = 'bat_';

export const messageWebhookId = (position: bigint): string => `${MESSAGE_ID_PREFIX}${position}`;
export const batchWebhookId = (): string => `${BATCH_ID_PREFIX}${randomUUID()}`;
export const isBatchWebhookId = (webhookId: string): boolean => webhookId.startsWith(BATCH_ID_PREFIX);
