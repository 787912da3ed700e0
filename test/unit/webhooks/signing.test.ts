import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { generateSigningSecret, signatureHeaders, signingKey } from '../../../src/webhooks/signing.js';

describe('Standard Webhooks signing', () => {
  it('makes whsec_ secrets of 24 random bytes', () => {
    const a = generateSigningSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(signingKey(a)).toHaveLength(24);
    expect(generateSigningSecret()).not.toBe(a);
  });

  it('signs id.timestamp.body so that the standardwebhooks package verifies it', () => {
    const secret = generateSigningSecret();
    const body = '{"event":"open","MessageID":19421777835146490}';
    const headers = signatureHeaders(signingKey(secret), 'msg_42', body);
    expect(headers['webhook-id']).toBe('msg_42');
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(() => new Webhook(secret).verify(body, { ...headers })).not.toThrow();
  });

  it('fails verification for another body, id or secret', () => {
    const secret = generateSigningSecret();
    const headers = signatureHeaders(signingKey(secret), 'msg_1', '{"a":1}');
    expect(() => new Webhook(secret).verify('{"a":2}', { ...headers })).toThrow();
    expect(() => new Webhook(secret).verify('{"a":1}', { ...headers, 'webhook-id': 'msg_2' })).toThrow();
    expect(() => new Webhook(generateSigningSecret()).verify('{"a":1}', { ...headers })).toThrow();
  });

  it('stamps the attempt time (a stale timestamp is refused by receivers)', () => {
    const secret = generateSigningSecret();
    const old = signatureHeaders(signingKey(secret), 'msg_1', '{}', new Date(Date.now() - 3_600_000));
    expect(() => new Webhook(secret).verify('{}', { ...old })).toThrow(/timestamp/i);
  });
});
