import { describe, expect, it } from 'vitest';
import { messageFacts } from '../../../projections/kit/message-facts.js';
import type { Group } from '../../../projections/kit/types.js';
import { groupOf } from '../../../src/projector/batch.js';
import { logRows, toLogEvent } from '../../support/projections.js';

const events = logRows('7', [
  { event: 'sent', time: 1_700_000_000, MessageID: 42, email: 'a@example.com', mj_campaign_id: 3 },
  { event: 'open', time: 1_700_000_060, MessageID: 42, email: 'a@example.com', mj_campaign_id: 3 },
]).map((row, i) => toLogEvent(row, BigInt(i + 1)));
const key = { kind: 'message', apiKeyId: '7', id: '42' } as const;

describe('message facts', () => {
  it('are computed once per group object: every projection of a fold reads the same', () => {
    const group = groupOf(key, events);
    expect(messageFacts(group)).toBe(messageFacts(group));
    expect(messageFacts(group).count.opened).toBe(1);
    expect(messageFacts(group).messageTime).toBe(1_700_000_000);
  });

  it('belong to the group object, not to its events array, which the live projector keeps in its cache', () => {
    // Facts tied to the cached array would live as long as the cache keeps it: promoted out
    // of the young generation, they filled the projector's old generation (group-cache.ts).
    const first = groupOf(key, events);
    const second = groupOf(key, events);
    expect(second).not.toBe(first);
    expect(messageFacts(second)).not.toBe(messageFacts(first));
    expect(messageFacts(second)).toEqual(messageFacts(first));
  });

  it('are computed for a frozen group too', () => {
    const group: Group = Object.freeze({ ...groupOf(key, events) });
    expect(messageFacts(group).count.sent).toBe(1);
    expect(messageFacts(group)).toEqual(messageFacts(groupOf(key, events)));
  });
});
