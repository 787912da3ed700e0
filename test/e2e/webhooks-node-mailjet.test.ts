import { fileURLToPath } from 'node:url';
import { Client as Mailjet } from 'node-mailjet';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { type Service, startService } from '../../src/main.js';
import { createApiKey } from '../../src/keys/key-store.js';
import { BIG_MESSAGE_ID } from '../support/events.js';
import { type TestEnv, createTestEnv, quietLogger } from '../support/harness.js';
import { metricValue } from '../support/metrics.js';
import { append } from '../support/projections.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The unmodified node-mailjet client manages callback URLs over HTTPS against a service running
 * the api and dispatcher roles, and the events that follow reach the URL it created, signed
 * with the secret the creation returned.
 */

const TLS = (name: string) => fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url));

let t: TestEnv;
let service: Service;
let receiver: WebhookReceiver;
let client: ReturnType<typeof Mailjet.apiConnect>;
let readOnly: ReturnType<typeof Mailjet.apiConnect>;

beforeAll(async () => {
  process.env['NODE_TLS_REJECT_UNAUTHORIZED'] = '0';
  t = await createTestEnv({ TLS_CERT: TLS('cert.pem'), TLS_KEY: TLS('key.pem'), WEBHOOK_ALLOWLIST: '127.0.0.1/32', WEBHOOK_POLL_MS: '50', WEBHOOK_BATCH_WINDOW_MS: '200' });
  const { NATS_URL: _nats, ...env } = t.env;
  service = await startService(loadConfig(env), ['api', 'dispatcher'], quietLogger());
  receiver = await WebhookReceiver.start();
  const host = `127.0.0.1:${new URL(service.url as string).port}`;
  client = Mailjet.apiConnect(t.key.ApiKey, t.key.SecretKey, { config: { host } });
  const ro = await createApiKey(t.db.kysely, { readOnly: true });
  readOnly = Mailjet.apiConnect(ro.ApiKey, ro.SecretKey, { config: { host } });
});

afterAll(async () => {
  await service?.stop();
  await receiver?.close();
  await t?.cleanup();
});

type Hook = { ID: number; APIKeyID: number; EventType: string; IsBackup: boolean; Status: string; Url: string; Version: number; SigningSecret?: string };
const first = (body: unknown) => (body as { Data: Hook[] }).Data[0] as Hook;

describe('eventcallbackurl through node-mailjet', () => {
  let created: Hook;

  it('creates (201), and the events that follow are delivered and verify with the returned secret', async () => {
    const res = await client.post('eventcallbackurl').request({ EventType: 'open', Url: receiver.url('/mj/open'), Version: 2 });
    expect(res.response.status).toBe(201);
    created = first(res.body);
    expect(created).toMatchObject({ APIKeyID: Number(t.key.APIKeyID), EventType: 'open', IsBackup: false, Status: 'alive', Version: 2 });
    await append(t.db, t.key.APIKeyID, [{ event: 'open', time: 1_700_000_000, MessageID: BIG_MESSAGE_ID, email: 'a@example.com', ip: '1.2.3.4', geo: 'FR', agent: 'UA' }]);
    await receiver.waitForRequests(1);
    const r = receiver.requests[0];
    expect(r?.body).toContain(`"MessageID":${BIG_MESSAGE_ID},`);
    expect(() => new Webhook(created.SigningSecret ?? '').verify(r?.body ?? '', r?.headers as Record<string, string>)).not.toThrow();
  });

  it('lists with the EventType filter as node-mailjet types it (a number), and gets by id', async () => {
    await client.post('eventcallbackurl').request({ EventType: 'click', Url: receiver.url('/mj/click') });
    const opens = await client.get('eventcallbackurl').request({}, { EventType: 6 });
    expect(opens.body).toMatchObject({ Count: 1, Total: 1, Data: [{ ID: created.ID, EventType: 'open' }] });
    const all = await client.get('eventcallbackurl').request({}, { Limit: 10 });
    expect((all.body as { Count: number }).Count).toBe(2);
    const one = await client.get('eventcallbackurl').id(created.ID).request();
    expect(first(one.body)).toMatchObject({ ID: created.ID, Url: receiver.url('/mj/open') });
  });

  it('updates with PATCH semantics, refuses duplicates and read-only writes as the client reports them', async () => {
    const put = await client.put('eventcallbackurl').id(created.ID).request({ Version: 1 });
    expect(put.response.status).toBe(200);
    expect(first(put.body)).toMatchObject({ Version: 1, Url: receiver.url('/mj/open') });
    await expect(client.post('eventcallbackurl').request({ EventType: 'open', Url: receiver.url('/mj/again') })).rejects.toMatchObject({
      statusCode: 400,
      ErrorMessage: 'MJ18 A Eventcallbackurl resource with value "open" for EventType already exists.',
    });
    await expect(client.post('eventcallbackurl').request({ EventType: 'open', Url: 'https://example.com' })).rejects.toMatchObject({ statusCode: 400 });
    await expect(readOnly.put('eventcallbackurl').id(created.ID).request({ Version: 2 })).rejects.toMatchObject({ statusCode: 403 });
    await expect(readOnly.get('eventcallbackurl').id(created.ID).request()).rejects.toMatchObject({ statusCode: 404 });
  });

  it('deletes (204, empty body) and the id is gone', async () => {
    const res = await client.delete('eventcallbackurl').id(created.ID).request();
    expect(res.response.status).toBe(204);
    expect(res.body).toBe('');
    await expect(client.get('eventcallbackurl').id(created.ID).request()).rejects.toMatchObject({ statusCode: 404 });
  });

  it('shows the attempts of the key at /v1/webhooks/attempts', async () => {
    const res = await fetch(`${service.url}/v1/webhooks/attempts`, { headers: { authorization: `Basic ${Buffer.from(`${t.key.ApiKey}:${t.key.SecretKey}`).toString('base64')}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ Count: 1, Total: 1, Data: [{ Outcome: 'delivered', StatusCode: 200, EventCount: 1 }] });
  });

  it('shows the dispatcher in /metrics: its attempts, requests in flight, the outbox and the URLs', async () => {
    const text = await (await fetch(`${service.url}/metrics`)).text();
    const value = (name: string) => metricValue(text, name);
    expect(value('mailtally_webhook_attempt_duration_seconds_count')).toBe('1');
    expect(value('mailtally_webhook_attempt_duration_seconds_bucket{le="+Inf"}')).toBe('1');
    expect(value('mailtally_webhook_requests_in_flight{lane="first"}')).toBe('0');
    expect(value('mailtally_webhook_requests_in_flight{lane="retry"}')).toBe('0');
    expect(value('mailtally_webhook_first_attempts_queued')).toBe('0');
    expect(value('mailtally_webhook_outbox_deliveries')).toBe('0');
    expect(value('mailtally_webhook_outbox_oldest_seconds')).toBe('0');
    // The click URL; the open URL was deleted.
    expect(value('mailtally_webhook_urls{status="alive"}')).toBe('1');
    expect(value('mailtally_webhook_urls{status="dead"}')).toBe('0');
  });
});
