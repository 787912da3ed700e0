import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client as Mailjet } from 'node-mailjet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import { loadConfig } from '../../src/config.js';
import { type Service, startService } from '../../src/main.js';
import { replay } from '../../src/projector/replay.js';
import { type TestEnv, createTestEnv, quietLogger } from '../support/harness.js';
import { runCli } from '../support/processes.js';
import { append } from '../support/projections.js';

/**
 * The official node-mailjet client, unmodified, against the server over HTTPS with the test
 * certificate: lists, filters, sort, countOnly, errors as the client throws them.
 */

const TLS = (name: string) => fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url));
const T0 = 1_700_000_000;

let t: TestEnv;
let service: Service;
let client: ReturnType<typeof Mailjet.apiConnect>;

beforeAll(async () => {
  // The test certificate is self-signed: this forked test process trusts it.
  process.env['NODE_TLS_REJECT_UNAUTHORIZED'] = '0';
  t = await createTestEnv({ TLS_CERT: TLS('cert.pem'), TLS_KEY: TLS('key.pem') });
  const { NATS_URL: _nats, ...env } = t.env;
  service = await startService(loadConfig(env), ['api'], quietLogger());
  await append(t.db, t.key.APIKeyID, [
    { event: 'sent', time: T0, MessageID: '19421777835146490', email: 'a@gmail.com', mj_campaign_id: 7 },
    { event: 'open', time: T0 + 60, MessageID: '19421777835146490', email: 'a@gmail.com', mj_campaign_id: 7, agent: 'Mozilla/5.0', ip: '1.2.3.4', geo: 'FR' },
    { event: 'sent', time: T0 + 3600, MessageID: '5', email: 'b@yahoo.com', mj_campaign_id: 7 },
  ]);
  await replay(t.db, PROJECTIONS, { readBatch: 10_000, catchUpBatch: 1000 });
  const port = new URL(service.url as string).port;
  client = Mailjet.apiConnect(t.key.ApiKey, t.key.SecretKey, { config: { host: `127.0.0.1:${port}` } });
});

afterAll(async () => {
  await service?.stop();
  await t?.cleanup();
});

describe('node-mailjet over HTTPS', () => {
  it('serves HTTPS only when given a certificate', () => {
    expect(service.url).toMatch(/^https:\/\//);
  });

  it('reads statcounters with filters, sort and paging', async () => {
    const res = await client.get('statcounters').request(
      {},
      { CounterSource: 'Campaign', SourceID: 7, CounterTiming: 'Message', CounterResolution: 'Hour', FromTS: T0 - 3600, Sort: 'Timeslice DESC', Limit: 1 },
    );
    expect(res.response.status).toBe(200);
    expect(res.body).toMatchObject({ Count: 1, Total: 2, Data: [{ Timeslice: '2023-11-14T23:00:00Z', Total: 1, SourceID: 7 }] });
  });

  it('counts with countOnly', async () => {
    const res = await client.get('statcounters').request({}, { CounterSource: 'APIKey', CounterTiming: 'Event', CounterResolution: 'Hour', FromTS: T0 - 3600, countOnly: 1 });
    expect(res.body).toEqual({ Count: 2, Data: [], Total: 2 });
  });

  it('reads a 64-bit MessageID back exactly (the client keeps it as a string)', async () => {
    const res = await client.get('message').id('19421777835146490').request();
    expect(res.response.status).toBe(200);
    expect(res.body).toMatchObject({ Count: 1, Total: 1, Data: [{ ID: '19421777835146490', Status: 'opened', CampaignID: 7 }] });
    const raw = await fetch(`${service.url}/v3/REST/message/19421777835146490`, { headers: { authorization: `Basic ${Buffer.from(`${t.key.ApiKey}:${t.key.SecretKey}`).toString('base64')}` } });
    expect(await raw.text()).toContain('"ID":19421777835146490');
  });

  it('lists message events with filters and sort', async () => {
    const res = await client.get('openinformation').request({}, { CampaignID: 7, Sort: 'OpenedAt DESC' });
    expect(res.body).toMatchObject({ Count: 1, Total: 1, Data: [{ MessageID: '19421777835146490', OpenedAt: '2023-11-14T22:14:20Z', UserAgentFull: 'Mozilla/5.0' }] });
    const history = await client.get('messagehistory').id('19421777835146490').request();
    expect((history.body as { Data: { EventType: string }[] }).Data.map((e) => e.EventType)).toEqual(['sent', 'opened']);
    const opened = await client.get('openinformation').id('19421777835146490').request();
    expect(opened.body).toMatchObject({ Count: 1, Data: [{ ID: '19421777835146490', MessageID: '19421777835146490' }] });
    const state = await client.get('messagestate').id(1).request();
    expect(state.body).toEqual({ Count: 1, Data: [{ ID: 1, RelatedTo: 'recipient', State: 'user unknown' }], Total: 1 });
  });

  it('answers 404 for an unknown message as the client reports it', async () => {
    await expect(client.get('message').id('42').request()).rejects.toMatchObject({ statusCode: 404, ErrorMessage: 'Object not found' });
  });

  it('surfaces a 400 the way the client reports it', async () => {
    const err = await client
      .get('statcounters')
      .request({}, { CounterSource: 'List', SourceID: 1, CounterTiming: 'Event', CounterResolution: 'Lifetime' })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ statusCode: 400, ErrorMessage: expect.stringMatching(/List is only available/) });
    expect((err as Error).message).toMatch(/^Unsuccessful: Status Code: "400" Message: "Invalid parameter combination/);
  });

  it('surfaces 401 for a wrong secret and 404 for an unknown resource', async () => {
    const port = new URL(service.url as string).port;
    const wrong = Mailjet.apiConnect(t.key.ApiKey, 'not-the-secret', { config: { host: `127.0.0.1:${port}` } });
    await expect(wrong.get('statcounters').request({}, { CounterSource: 'APIKey', CounterTiming: 'Message', CounterResolution: 'Lifetime' })).rejects.toMatchObject({ statusCode: 401 });
    await expect(client.get('nosuchresource').request()).rejects.toMatchObject({ statusCode: 404 });
  });
});

describe('mailtally publish against the HTTPS service', () => {
  it('says how to trust a certificate Node does not (the test one is self-signed)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailtally-publish-tls-'));
    try {
      const file = join(dir, 'events.jsonl');
      writeFileSync(file, `${JSON.stringify({ event: 'sent', time: T0, MessageID: '77', email: 'c@gmail.com' })}\n`);
      const { NATS_URL: _nats, ...env } = t.env;
      const r = await runCli(['publish', file, '--url', service.url as string], {
        env: { ...env, NODE_TLS_REJECT_UNAUTHORIZED: '1', MAILTALLY_API_KEY: t.key.ApiKey, MAILTALLY_SECRET_KEY: t.key.SecretKey },
      });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/cannot reach the HTTP ingest at https:.* \(--url\): .*certificate.*: the server's certificate is not one Node trusts; name it \(or its CA\) in NODE_EXTRA_CA_CERTS=<file\.pem>/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the API around the resources', () => {
  it('publishes an OpenAPI document built from the route schemas, and a browsable page at /docs', async () => {
    const doc = (await (await fetch(`${service.url}/openapi.json`)).json()) as { openapi: string; paths: Record<string, { get: { parameters: { name: string }[] } }> };
    expect(doc.openapi).toBe('3.1.0');
    const stat = doc.paths['/v3/REST/statcounters'];
    expect(stat?.get.parameters.map((p) => p.name)).toEqual(expect.arrayContaining(['CounterSource', 'CounterTiming', 'CounterResolution', 'SourceID', 'FromTS', 'ToTS', 'Limit', 'Offset', 'countOnly', 'Sort']));
    // The webhook routes are documented too, each method they answer.
    const methods = (path: string) => Object.keys(doc.paths[path] ?? {}).sort();
    expect(methods('/v3/REST/eventcallbackurl')).toEqual(['get', 'post']);
    expect(methods('/v3/REST/eventcallbackurl/{id}')).toEqual(['delete', 'get', 'put']);
    expect(methods('/v1/webhooks/attempts')).toEqual(['get']);
    expect(methods('/v1/webhooks/replay')).toEqual(['post']);
    const page = await fetch(`${service.url}/docs/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/swagger-ui/i);
  });

  it('exposes Prometheus metrics: per-route requests and latency, log head, reader lag', async () => {
    await client.get('statcounters').request({}, { CounterSource: 'APIKey', CounterTiming: 'Message', CounterResolution: 'Lifetime' });
    const text = await (await fetch(`${service.url}/metrics`)).text();
    expect(text).toMatch(/mailtally_http_requests_total\{method="GET",route="\/v3\/REST\/statcounters",status="200"\} [1-9]/);
    expect(text).toMatch(/mailtally_http_request_duration_seconds_bucket\{le="0.01",method="GET",route="\/v3\/REST\/statcounters"\}/);
    expect(text).toMatch(/mailtally_log_head_position 3/);
    expect(text).toMatch(/mailtally_reader_lag_events\{reader="statcounters"\} 0/);
    // Both pools of an api process: the requests' has at least the connection that served the call.
    expect(text).toMatch(/mailtally_db_pool_connections\{pool="main",state="total"\} \d+/);
    expect(text).toMatch(/mailtally_db_pool_connections\{pool="requests",state="total"\} [1-9]/);
    expect(text).toMatch(/mailtally_db_pool_connections\{pool="requests",state="waiting"\} 0/);
  });
});
