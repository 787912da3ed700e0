import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESOURCES } from '../../../src/api/routes/index.js';
import { type ApiFixture, openApiFixture } from '../../support/api.js';
import { sampleEvents } from '../../support/events.js';

/**
 * Fuzzed query strings and item paths against every resource: whatever arrives, the answer is a
 * 2xx or a 4xx in Mailjet's error envelope — never a 5xx.
 */

let f: ApiFixture;
beforeAll(async () => {
  f = await openApiFixture();
  await f.given(f.keys.a, sampleEvents());
});
afterAll(async () => f?.close());

const VALUES = fc.oneof(
  fc.constantFrom('', '0', '1', '-1', 'true', 'FALSE', '18446744073709551615', '18446744073709551616', '1e3', 'NaN', '2024-02-30', '2024-01-01T00:00:00Z', 'Day', 'desc', '%', "'; DROP TABLE events; --", '\u0000', 'ID DESC', 'a,b,,c', '9'.repeat(40)),
  fc.string({ maxLength: 30 }),
  fc.integer().map(String),
);

function queryArb(names: readonly string[]) {
  const name = fc.oneof(fc.constantFrom(...names, ...names.map((n) => n.toLowerCase()), ...names.map((n) => `${n}[]`)), fc.string({ maxLength: 12 }));
  return fc.array(fc.tuple(name, VALUES), { maxLength: 6 }).map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'));
}

describe.each(RESOURCES.map((r) => [r.name, r] as const))('%s', (_name, resource) => {
  const names = Object.keys(resource.query.shape);

  it('never answers a 5xx to a fuzzed query string', async () => {
    await fc.assert(
      fc.asyncProperty(queryArb(names), async (qs) => {
        const res = await f.get(`/v3/REST/${resource.name}?${qs}`);
        expect(res.status, qs).toBeLessThan(500);
        if (res.status >= 400) expect(res.body).toEqual({ ErrorInfo: '', ErrorMessage: expect.any(String), StatusCode: res.status });
      }),
      { numRuns: 150 },
    );
  });

  it('never answers a 5xx to a fuzzed item path', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(VALUES, fc.constantFrom('Campaign', 'NL', 'AX', 'a@b.c')), { minLength: 1, maxLength: 3 }), async (segments) => {
        const path = segments.map((s) => encodeURIComponent(s === '' ? 'x' : s)).join('/');
        const res = await f.get(`/v3/REST/${resource.name}/${path}`);
        expect(res.status, path).toBeLessThan(500);
      }),
      { numRuns: 100 },
    );
  });
});
