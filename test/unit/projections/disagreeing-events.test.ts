import { describe, expect, it } from 'vitest';
import { MemoryLog } from '../../support/projections.js';
import { D0 } from './scenarios/common.js';

/**
 * A message whose events disagree gives its one-way values to the rows its events name: as many
 * rows as its events carry values, never their product. (A version that gave every list × every
 * address wrote 9 million rows for one message of 3,000 events.)
 */
describe('one message whose events each carry another list and address', () => {
  it('names one list recipient per event, and one contact per address', () => {
    const log = new MemoryLog();
    const n = 400;
    log.append(
      '1',
      Array.from({ length: n }, (_, i) => ({ event: i === 0 ? 'sent' : 'open', EventID: `e${i}`, time: D0 + i, MessageID: '42', email: `u${i}@example.com`, mj_list_id: i + 1, mj_contact_id: i + 1 })),
    );
    const tables = log.tables();
    const recipients = tables.get('list_recipient_stats') ?? [];
    const contacts = tables.get('contact_stats') ?? [];
    // n pairs its events carry, plus the pair it counts under (list 400, the largest address u9@…), which none carries.
    expect(recipients).toHaveLength(n + 1);
    expect(recipients.filter((r) => Number(r['messages']) === 1)).toHaveLength(1);
    expect(contacts).toHaveLength(n);
    // Each named address keeps what its own event says.
    expect(contacts.find((c) => c['email'] === 'u7@example.com')).toMatchObject({ contact_id: '8', last_activity_at: D0 + 7, messages: 0, named: 1 });
  });
});
