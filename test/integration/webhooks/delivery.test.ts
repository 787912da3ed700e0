import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../../src/db/connect.js';
import type { Dispatcher } from '../../../src/webhooks/dispatcher.js';
import { DIALECTS, openMigratedDb } from '../../support/databases.js';
import { BIG_MESSAGE_ID, sampleEvents } from '../../support/events.js';
import { append, positionsInLog } from '../../support/projections.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';
import { hook, outboxEmpty, startDispatcher } from './fixture.js';

/**
 * Events of all seven webhook types reach the right URLs with Mailjet's exact payloads —
 * Version 1 one bare object per request, Version 2 arrays — signed so that the standardwebhooks
 * package verifies them; the other event types and tenants without URLs send nothing.
 */

const TYPES = ['sent', 'open', 'click', 'bounce', 'blocked', 'spam', 'unsub'] as const;
const GUID = '1ab23cd4-e567-8901-2345-6789f0gh1i2j';
const UA = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)';
const COMMON = `"MessageID":${BIG_MESSAGE_ID},"Message_GUID":"${GUID}","email":"api@mailjet.com","mj_campaign_id":7257,"mj_contact_id":4,"customcampaign":""`;
const TAIL = `"CustomID":"helloworld","Payload":""}`;

/** Mailjet's callback objects for sampleEvents(), byte for byte. */
const EXPECTED: Record<(typeof TYPES)[number], string> = {
  sent: `{"event":"sent","time":1433333949,${COMMON},"mj_message_id":"${BIG_MESSAGE_ID}","smtp_reply":"sent (250 2.0.0 OK 1433333948 fa5si855896wjc.199 - gsmtp)",${TAIL}`,
  open: `{"event":"open","time":1433334009,${COMMON},"ip":"127.0.0.1","geo":"US","agent":"${UA}",${TAIL}`,
  click: `{"event":"click","time":1433334069,${COMMON},"url":"https://mailjet.com/?utm_source=x","ip":"127.0.0.1","geo":"FR","agent":"${UA}",${TAIL}`,
  bounce: `{"event":"bounce","time":1433333954,${COMMON},"blocked":false,"hard_bounce":true,"error_related_to":"recipient","error":"user unknown","comment":"Host or domain name not found. Name service error for name=lbjsnrftlsiuvbsren.com type=A: Host not found",${TAIL}`,
  blocked: `{"event":"blocked","time":1433333955,${COMMON},"error_related_to":"recipient","error":"user unknown",${TAIL}`,
  spam: `{"event":"spam","time":1433334249,${COMMON},"source":"JMRPP",${TAIL}`,
  unsub: `{"event":"unsub","time":1433334349,${COMMON},"mj_list_id":1,"ip":"127.0.0.1","geo":"FR","agent":"List-Unsubscribe",${TAIL}`,
};

/** sampleEvents with EventIDs (to find positions) and MessageID as a bare 64-bit integer for half of them. */
function events(prefix: string): Record<string, unknown>[] {
  return sampleEvents().map((e, i) => ({ ...e, EventID: `${prefix}-${String(e['event'])}`, ...(i % 2 === 0 && 'MessageID' in e ? { MessageID: BigInt(BIG_MESSAGE_ID) } : {}) }));
}

describe.each(DIALECTS)('webhook delivery on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let receiver: WebhookReceiver;
  let dispatcher: Dispatcher;
  const secrets = new Map<string, string>();

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    receiver = await WebhookReceiver.start();
    for (const type of TYPES) {
      secrets.set(`/v1/${type}`, (await hook(db, '1', { EventType: type, Url: receiver.url(`/v1/${type}`) })).secret);
      secrets.set(`/v2/${type}`, (await hook(db, '2', { eventtype: type, url: receiver.url(`/v2/${type}`), Version: '2' })).secret);
    }
    secrets.set('/grouped', (await hook(db, '3', { EventType: 'open', Url: receiver.url('/grouped'), Version: 2 })).secret);
    dispatcher = await startDispatcher(db, { batchMaxEvents: 20, batchWindowMs: 300 });
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await receiver?.close();
    await cleanup?.();
  });

  it('posts one bare Mailjet object per event to Version 1 URLs, signed, with webhook-id msg_<position>', async () => {
    await append(db, '1', events('t1'));
    await append(db, '9', events('t9')); // no URLs: nothing sent
    await receiver.waitForIds(7, '/v1/');
    await outboxEmpty(db);
    const position = await positionsInLog(db, '1');
    for (const type of TYPES) {
      const got = receiver.at(`/v1/${type}`);
      expect(got).toHaveLength(1);
      const r = got[0];
      if (r === undefined) throw new Error('unreachable');
      expect(r.body).toBe(EXPECTED[type]);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.webhookId).toBe(`msg_${position(`t1-${type}`)}`);
      const verified = new Webhook(secrets.get(`/v1/${type}`) ?? '').verify(r.body, r.headers as Record<string, string>);
      expect((verified as { event: string }).event).toBe(type);
    }
    expect(receiver.requests.filter((r) => !r.path.startsWith('/v1/'))).toEqual([]);
  });

  it('posts arrays to Version 2 URLs', async () => {
    await append(db, '2', events('t2'));
    await receiver.waitForIds(7, '/v2/');
    for (const type of TYPES) {
      const got = receiver.at(`/v2/${type}`);
      expect(got).toHaveLength(1);
      const r = got[0];
      if (r === undefined) throw new Error('unreachable');
      expect(r.body).toBe(`[${EXPECTED[type]}]`);
      expect(r.webhookId).toMatch(/^bat_[0-9a-f-]{36}$/);
      expect(() => new Webhook(secrets.get(`/v2/${type}`) ?? '').verify(r.body, r.headers as Record<string, string>)).not.toThrow();
    }
  });

  it('groups a Version 2 URL`s events of the window into bounded arrays, each event once', async () => {
    const opens = Array.from({ length: 50 }, (_, i) => ({ event: 'open', time: 1_433_334_000 + i, MessageID: String(1000 + i), email: `u${i}@example.com`, EventID: `g-${i}` }));
    await append(db, '3', opens.slice(0, 25));
    await append(db, '3', opens.slice(25));
    await waitForEvents(receiver, '/grouped', 50);
    const batches = receiver.at('/grouped').map((r) => JSON.parse(r.body) as { MessageID: number }[]);
    expect(batches.every((b) => Array.isArray(b) && b.length >= 1 && b.length <= 20)).toBe(true);
    // 50 events in one window: a few full batches, not 50 requests.
    expect(batches.length).toBeLessThanOrEqual(4);
    expect(batches.flat().map((e) => e.MessageID).sort((a, b) => a - b)).toEqual(opens.map((_, i) => 1000 + i));
  });
});

async function waitForEvents(receiver: WebhookReceiver, path: string, n: number): Promise<void> {
  const count = () => receiver.at(path).reduce((sum, r) => sum + (JSON.parse(r.body) as unknown[]).length, 0);
  const deadline = Date.now() + 20_000;
  while (count() < n) {
    if (Date.now() > deadline) throw new Error(`only ${count()} of ${n} events reached ${path}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
