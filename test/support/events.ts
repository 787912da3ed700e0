/**
 * Realistic raw events in Mailjet's callback shapes (reference/mailjet-api.md §4), one of each
 * type, for tests to copy and vary.
 */
export const BIG_MESSAGE_ID = '19421777835146490';

export function sampleEvents(messageId: string = BIG_MESSAGE_ID, time = 1_433_333_949): Record<string, unknown>[] {
  const common = {
    MessageID: messageId,
    Message_GUID: '1ab23cd4-e567-8901-2345-6789f0gh1i2j',
    email: 'api@mailjet.com',
    mj_campaign_id: 7257,
    mj_contact_id: 4,
    customcampaign: '',
    CustomID: 'helloworld',
    Payload: '',
  };
  const ua = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)';
  return [
    { event: 'queued', time: time - 2, ...common },
    { event: 'sent', time, ...common, mj_message_id: messageId, smtp_reply: 'sent (250 2.0.0 OK 1433333948 fa5si855896wjc.199 - gsmtp)' },
    { event: 'deferred', time: time - 1, ...common, error_related_to: 'domain', error: 'greylisted', smtp_reply: '451 4.7.1 try later' },
    { event: 'open', time: time + 60, ...common, ip: '127.0.0.1', geo: 'US', agent: ua },
    { event: 'click', time: time + 120, ...common, url: 'https://mailjet.com/?utm_source=x', ip: '127.0.0.1', geo: 'FR', agent: ua },
    {
      event: 'bounce',
      time: time + 5,
      ...common,
      blocked: false,
      hard_bounce: true,
      error_related_to: 'recipient',
      error: 'user unknown',
      comment: 'Host or domain name not found. Name service error for name=lbjsnrftlsiuvbsren.com type=A: Host not found',
    },
    { event: 'blocked', time: time + 6, ...common, error_related_to: 'recipient', error: 'user unknown' },
    { event: 'spam', time: time + 300, ...common, source: 'JMRPP' },
    { event: 'unsub', time: time + 400, ...common, mj_list_id: 1, ip: '127.0.0.1', geo: 'FR', agent: 'List-Unsubscribe' },
    {
      event: 'campaign',
      time: time - 3600,
      mj_campaign_id: 7257,
      Title: 'Spring sale',
      Subject: 'Everything must go',
      IDType: 'Campaign',
      Status: 2,
      SendTimeStart: time - 3600,
      Starred: false,
      EditMode: 'html',
      EditType: 'full',
    },
  ];
}

/** JSON text with `MessageID` as a bare 64-bit integer, as Mailjet writes it. */
export const withBareMessageId = (event: Record<string, unknown>): string =>
  JSON.stringify(event).replace(/"MessageID":"(\d+)"/, '"MessageID":$1');
