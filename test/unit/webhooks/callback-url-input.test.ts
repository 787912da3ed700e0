import { describe, expect, it } from 'vitest';
import {
  checkCallbackUrl,
  parseCallbackUrlCreate,
  parseCallbackUrlFilters,
  parseCallbackUrlPatch,
} from '../../../src/webhooks/callback-url-input.js';

describe('checkCallbackUrl', () => {
  it.each([
    'https://example.com/hooks/mailjet',
    'http://example.com/x',
    'https://user:p%40ss@example.com:8443/path?token=1',
    'HTTPS://Example.COM/Path',
    'http://127.0.0.1:3000/hook',
    'http://[2001:db8::1]/hook',
  ])('accepts %s', (url) => {
    expect(checkCallbackUrl(url)).toEqual({ ok: true, value: url });
  });

  it.each([
    ['https://example.com', /root URL/],
    ['https://example.com/', /root URL/],
    ['https://example.com/?token=x', /root URL/],
    ['ftp://example.com/x', /http:\/\/ or https:\/\//],
    ['javascript:alert(1)', /http:\/\/ or https:\/\//],
    ['/relative/path', /absolute http or https URL/],
    ['example.com/hook', /absolute http or https URL/],
    ['', /absolute http or https URL/],
    [42, /absolute http or https URL/],
    [null, /absolute http or https URL/],
    [`https://example.com/${'a'.repeat(2100)}`, /longer than 2048/],
    ['https://example.com/x\nInjected: 1', /spaces or control characters/],
    ['https://example.com/a\tb', /spaces or control characters/],
    ['https://example.com/a b', /spaces or control characters/],
    ['https://example.com/a\u0000', /spaces or control characters/],
    ['http:\\\\example.com\\hook', /backslash/],
    ['https://example.com\\hook', /backslash/],
    ['http:example.com/hook', /http:\/\/ or https:\/\//],
    ['http:/example.com/hook', /http:\/\/ or https:\/\//],
    ['https://example.com:0/hook', /port must be between 1 and 65535/],
    ['http://127.0.0.1:99999/x', /port must be between 1 and 65535/],
    ['https://u:p@example.com:65536/hook', /port must be between 1 and 65535/],
    ['https://[::1]:70000/hook', /port must be between 1 and 65535/],
    ['https://example.com:12ab/hook', /absolute http or https URL/],
  ])('refuses %j', (url, message) => {
    const r = checkCallbackUrl(url);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.message).toMatch(message);
  });
});

describe('parseCallbackUrlCreate', () => {
  it('fills the defaults: primary, alive, Version 1', () => {
    expect(parseCallbackUrlCreate({ EventType: 'open', Url: 'https://example.com/open' })).toEqual({
      ok: true,
      value: { eventType: 'open', url: 'https://example.com/open', isBackup: false, status: 'alive', version: 1 },
    });
  });

  it('matches property names without regard to case and takes numbers and booleans as strings', () => {
    expect(parseCallbackUrlCreate({ eventtype: 'CLICK', URL: 'https://example.com/c', isBackup: 'true', version: '2', STATUS: 'Dead' })).toEqual({
      ok: true,
      value: { eventType: 'click', url: 'https://example.com/c', isBackup: true, status: 'dead', version: 2 },
    });
    expect(parseCallbackUrlCreate({ EventType: 6, Url: 'https://example.com/o', IsBackup: 1, Version: 1 })).toMatchObject({ ok: true, value: { eventType: 'open', isBackup: true } });
    expect(parseCallbackUrlCreate({ EventType: '5', Url: 'https://example.com/u', IsBackup: '0' })).toMatchObject({ ok: true, value: { eventType: 'unsub', isBackup: false } });
  });

  it('ignores the read-only properties a client may send back (ID, APIKeyID)', () => {
    expect(parseCallbackUrlCreate({ ID: 5, APIKeyID: 9, EventType: 'sent', Url: 'https://example.com/s' }).ok).toBe(true);
  });

  it.each([
    [{ Url: 'https://example.com/x' }, 'EventType is required'],
    [{ EventType: 'open' }, 'Url is required'],
    [{}, 'Url and EventType are required'],
    [{ EventType: 'opened', Url: 'https://example.com/x' }, 'EventType must be one of sent, open, click, bounce, blocked, spam, unsub (or 1-7), got "opened"'],
    [{ EventType: 8, Url: 'https://example.com/x' }, 'EventType must be one of sent, open, click, bounce, blocked, spam, unsub (or 1-7), got 8'],
    [{ EventType: 'open', Url: 'https://example.com/x', Version: 3 }, 'Version must be 1 (one event per request) or 2 (grouped events), got 3'],
    [{ EventType: 'open', Url: 'https://example.com/x', IsBackup: 'maybe' }, 'IsBackup must be true or false, got "maybe"'],
    [{ EventType: 'open', Url: 'https://example.com/x', Status: 'sleeping' }, 'Status must be alive or dead, got "sleeping"'],
    [{ EventType: 'open', Url: 'https://example.com/x', Colour: 'red' }, 'Unknown property "Colour"; an eventcallbackurl has EventType, Url, IsBackup, Status, Version'],
    [{ EventType: 'open', eventtype: 'click', Url: 'https://example.com/x' }, 'Property EventType is given twice'],
    [[], 'The request body must be a JSON object, e.g. {"EventType":"open","Url":"https://example.com/hooks/open"}'],
  ])('refuses %j: %s', (body, message) => {
    expect(parseCallbackUrlCreate(body)).toEqual({ ok: false, message });
  });

  it('reports every bad property at once', () => {
    const r = parseCallbackUrlCreate({ EventType: 'x', Url: 'https://example.com', Version: 'two' });
    expect(r.ok ? '' : r.message.split('; ')).toHaveLength(3);
  });
});

describe('parseCallbackUrlPatch', () => {
  it('takes only what is given', () => {
    expect(parseCallbackUrlPatch({ url: 'https://example.com/new' })).toEqual({ ok: true, value: { url: 'https://example.com/new' } });
    expect(parseCallbackUrlPatch({})).toEqual({ ok: true, value: {} });
  });
});

describe('parseCallbackUrlFilters', () => {
  it('takes EventType as a name or as node-mailjet`s number, and the other filters', () => {
    const numbers = [1, 2, 3, 4, 5, 6, 7].map((n) => parseCallbackUrlFilters({ EventType: String(n) }));
    expect(numbers.map((r) => (r.ok ? r.value.eventType : null))).toEqual(['click', 'bounce', 'spam', 'blocked', 'unsub', 'open', 'sent']);
    expect(parseCallbackUrlFilters({ eventType: 'blocked', status: 'dead', backup: 'true', Version: '2', Limit: '5', Offset: '1', Sort: 'ID' })).toEqual({
      ok: true,
      value: { eventType: 'blocked', status: 'dead', isBackup: true, version: 2 },
    });
    expect(parseCallbackUrlFilters({ IsBackup: '0' })).toEqual({ ok: true, value: { isBackup: false } });
  });

  it('refuses a bad filter with a clear message', () => {
    expect(parseCallbackUrlFilters({ EventType: '9' })).toEqual({ ok: false, message: 'EventType must be one of sent, open, click, bounce, blocked, spam, unsub (or 1-7), got "9"' });
    expect(parseCallbackUrlFilters({ Backup: 'yes please' })).toEqual({ ok: false, message: 'Backup must be true or false, got "yes please"' });
  });
});
