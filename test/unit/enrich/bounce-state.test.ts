import { describe, it, expect } from 'vitest';
import {
  MESSAGE_STATES,
  bounceStateId,
  messageState,
  messageStateById,
} from '../../../src/events/enrich/bounce-state.js';

describe('MESSAGE_STATES', () => {
  it('has the 21 Mailjet states with ids 1..21 in order', () => {
    expect(MESSAGE_STATES.map((s) => s.id)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    expect(new Set(MESSAGE_STATES.map((s) => s.error)).size).toBe(21);
  });

  it('matches the Mailjet table', () => {
    expect(MESSAGE_STATES[0]).toEqual({ id: 1, name: 'UserUnknown', relatedTo: 'recipient', error: 'user unknown' });
    expect(MESSAGE_STATES[5]).toEqual({
      id: 6,
      name: 'RelayOrAccessDenied',
      relatedTo: 'domain',
      error: 'relay/access denied',
    });
    expect(MESSAGE_STATES[12]).toEqual({ id: 13, name: 'GreyListed', relatedTo: 'domain', error: 'greylisted' });
    expect(MESSAGE_STATES[20]).toEqual({ id: 21, name: 'SpamReporter', relatedTo: 'recipient', error: 'spam reporter' });
  });
});

describe('bounceStateId', () => {
  it.each(MESSAGE_STATES.map((s) => [s.error, s.id] as const))('%s → %i', (error, id) => {
    expect(bounceStateId(error)).toBe(id);
  });

  it('is case- and whitespace-insensitive', () => {
    expect(bounceStateId('User Unknown')).toBe(1);
    expect(bounceStateId('  QUOTA   exceeded\n')).toBe(3);
    expect(bounceStateId('Relay / Access Denied')).toBe(6);
    expect(bounceStateId('GreyListed')).toBe(13);
    expect(bounceStateId('Spam PreBlocked')).toBe(16);
    expect(bounceStateId('preblocked')).toBe(14);
  });

  it('returns null for unknown or missing text', () => {
    expect(bounceStateId(undefined)).toBeNull();
    expect(bounceStateId('')).toBeNull();
    expect(bounceStateId('   ')).toBeNull();
    expect(bounceStateId('user unknown please')).toBeNull();
    expect(bounceStateId('550 5.1.1 mailbox does not exist')).toBeNull();
  });
});

describe('messageState / messageStateById', () => {
  it('return the full state', () => {
    expect(messageState('Content blocked')).toMatchObject({ id: 8, name: 'ContentBlocked', relatedTo: 'spam' });
    expect(messageStateById(19)).toMatchObject({ name: 'TypoFix', relatedTo: 'domain', error: 'typofix' });
    expect(messageStateById(0)).toBeNull();
    expect(messageState('nope')).toBeNull();
  });
});
