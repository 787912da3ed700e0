import { describe, it, expect } from 'vitest';
import { ESP_NAMES, espName, recipientDomain } from '../../../src/events/enrich/esp.js';

describe('recipientDomain', () => {
  it('returns the lower-cased part after the last @', () => {
    expect(recipientDomain('John.Doe@Example.COM')).toBe('example.com');
    expect(recipientDomain('"weird@local"@Gmail.com')).toBe('gmail.com');
  });

  it('trims and removes a trailing dot', () => {
    expect(recipientDomain('a@ example.org. ')).toBe('example.org');
    expect(recipientDomain('  a@GMAIL.COM.')).toBe('gmail.com');
  });

  it('returns empty string when there is no domain', () => {
    expect(recipientDomain('no-at-sign')).toBe('');
    expect(recipientDomain('')).toBe('');
    expect(recipientDomain('user@')).toBe('');
    expect(recipientDomain('user@ . ')).toBe('');
  });
});

describe('espName', () => {
  const cases: ReadonlyArray<readonly [string, string]> = [
    ['gmail.com', 'Gmail'],
    ['googlemail.com', 'Gmail'],
    ['outlook.com', 'Outlook'],
    ['outlook.fr', 'Outlook'],
    ['hotmail.com', 'Outlook'],
    ['hotmail.co.uk', 'Outlook'],
    ['hotmail.fr', 'Outlook'],
    ['live.com', 'Outlook'],
    ['live.com.au', 'Outlook'],
    ['live.fr', 'Outlook'],
    ['msn.com', 'Outlook'],
    ['yahoo.com', 'Yahoo'],
    ['yahoo.co.jp', 'Yahoo'],
    ['yahoo.fr', 'Yahoo'],
    ['ymail.com', 'Yahoo'],
    ['rocketmail.com', 'Yahoo'],
    ['aol.com', 'Yahoo'],
    ['icloud.com', 'Apple'],
    ['me.com', 'Apple'],
    ['mac.com', 'Apple'],
    ['gmx.de', 'GMX'],
    ['gmx.net', 'GMX'],
    ['gmx.com', 'GMX'],
    ['web.de', 'Web.de'],
    ['orange.fr', 'Orange'],
    ['wanadoo.fr', 'Orange'],
    ['free.fr', 'Free'],
    ['sfr.fr', 'SFR'],
    ['yandex.ru', 'Yandex'],
    ['yandex.com.tr', 'Yandex'],
    ['mail.ru', 'Mail.ru'],
    ['zoho.com', 'Zoho'],
    ['proton.me', 'Proton'],
    ['protonmail.com', 'Proton'],
    ['comcast.net', 'Comcast'],
    ['laposte.net', 'La Poste'],
    ['t-online.de', 'T-Online'],
    ['libero.it', 'Libero'],
    ['qq.com', 'QQ'],
    ['163.com', '163'],
    ['naver.com', 'Naver'],
  ];

  it.each(cases)('%s → %s', (domain, expected) => {
    expect(espName(domain)).toBe(expected);
  });

  it('is case- and whitespace-insensitive and ignores a trailing dot', () => {
    expect(espName('GMAIL.COM')).toBe('Gmail');
    expect(espName('  Hotmail.Co.UK ')).toBe('Outlook');
    expect(espName('gmail.com.')).toBe('Gmail');
  });

  it('classifies unknown domains as others', () => {
    expect(espName('example.com')).toBe('others');
    expect(espName('mycompany.fr')).toBe('others');
    expect(espName('')).toBe('others');
    expect(espName('localhost')).toBe('others');
    expect(espName('gmail')).toBe('others');
  });

  it('does not match look-alikes, subdomains or long suffixes', () => {
    expect(espName('notgmail.com')).toBe('others');
    expect(espName('gmail.com.evil.net')).toBe('others');
    expect(espName('eu.gmail.com')).toBe('others');
    expect(espName('mail.outlook.com')).toBe('others');
    expect(espName('outlook.example.com')).toBe('others');
    expect(espName('outlook.a.b.c')).toBe('others');
    expect(espName('live.company')).toBe('others');
    expect(espName('me.org')).toBe('others');
    expect(espName('gmail.fr')).toBe('others');
  });

  it('works with recipientDomain', () => {
    expect(espName(recipientDomain('Someone@Hotmail.co.uk'))).toBe('Outlook');
  });

  it('ESP_NAMES lists every possible result including others', () => {
    expect(ESP_NAMES).toContain('others');
    expect(new Set(ESP_NAMES).size).toBe(ESP_NAMES.length);
    for (const [domain] of cases) expect(ESP_NAMES).toContain(espName(domain));
    expect(Object.isFrozen(ESP_NAMES)).toBe(true);
  });
});
