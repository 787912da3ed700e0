import { describe, expect, it } from 'vitest';
import { mailjetCallbackJson, type SourceEvent } from '../../../src/webhooks/mailjet-payload.js';

const base: SourceEvent = {
  position: 1n,
  apiKeyId: 1n,
  type: 'sent',
  time: 1_433_333_949n,
  messageId: '576460765503091475',
  campaignId: 0n,
  contactId: 0n,
  listId: 0n,
  payload: {},
};

describe('mailjetCallbackJson', () => {
  it('writes MessageID as a bare 64-bit integer and mj_message_id as its string twin', () => {
    const text = mailjetCallbackJson(base);
    expect(text).toContain('"MessageID":576460765503091475,');
    expect(text).toContain('"mj_message_id":"576460765503091475"');
  });

  it('sends every Mailjet field even when the producer left it out ("" and 0), and nothing else', () => {
    const text = mailjetCallbackJson({ ...base, type: 'unsub', listId: 12n, payload: { email: 'a@b.c', EventID: 'x', APIKeyID: 1, sender: 's@x.y', mj_sender_id: 3 } });
    expect(text).toBe(
      '{"event":"unsub","time":1433333949,"MessageID":576460765503091475,"Message_GUID":"","email":"a@b.c","mj_campaign_id":0,"mj_contact_id":0,"customcampaign":"","mj_list_id":12,"ip":"","geo":"","agent":"","CustomID":"","Payload":""}',
    );
  });

  it('sends the address without the spaces around it, as the log keeps and dedupes it', () => {
    expect(JSON.parse(mailjetCallbackJson({ ...base, payload: { email: '  sp@x.com ' } }))).toMatchObject({ email: 'sp@x.com' });
  });

  it('gives bounces booleans (false when absent) and a comment only when known', () => {
    const none = JSON.parse(mailjetCallbackJson({ ...base, type: 'bounce', payload: {} })) as Record<string, unknown>;
    expect(none).toMatchObject({ blocked: false, hard_bounce: false, error_related_to: '', error: '' });
    expect('comment' in none).toBe(false);
    const some = JSON.parse(mailjetCallbackJson({ ...base, type: 'bounce', payload: { blocked: true, hard_bounce: true, comment: 'no such user' } })) as Record<string, unknown>;
    expect(some).toMatchObject({ blocked: true, hard_bounce: true, comment: 'no such user' });
  });

  it('escapes text as JSON and keeps the click`s URL as sent', () => {
    const text = mailjetCallbackJson({ ...base, type: 'click', payload: { url: 'https://x.y/?a="1"&b=\u2028', Payload: '{"meta":1}' } });
    const parsed = JSON.parse(text) as Record<string, unknown>;
    expect(parsed['url']).toBe('https://x.y/?a="1"&b=\u2028');
    expect(parsed['Payload']).toBe('{"meta":1}');
  });
});
