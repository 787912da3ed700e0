import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maxText } from '../../../projections/kit/ids.js';
import { messageFacts } from '../../../projections/kit/message-facts.js';
import { compareText } from '../../../projections/kit/text-order.js';
import { compareValues } from '../../../src/projector/contribution.js';
import { groupOf } from '../../../src/projector/batch.js';
import { byTimeThenId } from '../../../src/projector/read-groups.js';
import { logRows, toLogEvent } from '../../support/projections.js';

/** What Postgres compares for a `COLLATE "C"` column of a UTF-8 database: the bytes. */
const byUtf8Bytes = (a: string, b: string) => Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));

/** U+FFFD sorts before U+1F600 by code point, after it by UTF-16 unit (0xFFFD > 0xD83D). */
const REPLACEMENT = '\uFFFD';
const GRINNING = '\u{1F600}';

/** Text made of the characters where the orders can part, beside plain ones. */
const trickyText = fc.string({ unit: fc.constantFrom('a', 'é', '\uE000', REPLACEMENT, '\uFFFF', GRINNING, '\u{10FFFF}', '\u{10000}'), maxLength: 6 });

describe('text order', () => {
  it('is the order of UTF-8 bytes (Postgres COLLATE "C"), for any two strings', () => {
    fc.assert(
      fc.property(fc.oneof(trickyText, fc.string({ unit: 'grapheme', maxLength: 8 })), fc.oneof(trickyText, fc.string({ unit: 'grapheme', maxLength: 8 })), (a, b) => {
        expect(Math.sign(compareText(a, b))).toBe(byUtf8Bytes(a, b));
      }),
      { numRuns: 2000 },
    );
  });

  it('puts a character beyond U+FFFF after U+E000–U+FFFF', () => {
    expect(compareText(REPLACEMENT, GRINNING)).toBeLessThan(0);
    expect(compareText(`x${GRINNING}`, `x${REPLACEMENT}z`)).toBeGreaterThan(0);
    expect(compareText('b', GRINNING)).toBeLessThan(0);
  });

  it('decides the fold’s ties: EventIDs at the same second, the largest text, one-way columns', () => {
    const [early, late] = logRows('7', [
      { event: 'open', time: 1_700_000_000, MessageID: 42, email: `${GRINNING}@example.com`, EventID: GRINNING },
      { event: 'open', time: 1_700_000_000, MessageID: 42, email: `${REPLACEMENT}@example.com`, EventID: REPLACEMENT },
    ]).map((row, i) => toLogEvent(row, BigInt(i + 1)));
    if (early === undefined || late === undefined) throw new Error('two events expected');
    expect(byTimeThenId(late, early)).toBeLessThan(0);
    expect(maxText(REPLACEMENT, GRINNING)).toBe(GRINNING);
    expect(maxText(GRINNING, REPLACEMENT)).toBe(GRINNING);
    expect(compareValues(GRINNING, REPLACEMENT)).toBeGreaterThan(0);

    const facts = messageFacts(groupOf({ kind: 'message', apiKeyId: '7', id: '42' }, [late, early]));
    expect(facts.first.opened?.eventId).toBe(REPLACEMENT);
    expect(facts.email).toBe(`${GRINNING}@example.com`);
  });
});
