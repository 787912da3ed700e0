import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

const THIS_FILE = fileURLToPath(import.meta.url);
const TLS = (name: string) => fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url));

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('loadConfig', () => {
  it('defaults to the embedded mode: PGlite in ./data, HTTP ingest, 127.0.0.1:3000', () => {
    const c = loadConfig({});
    expect(c.database.kind).toBe('pglite');
    expect(c.database.kind === 'pglite' && c.database.dataDir.endsWith('/data')).toBe(true);
    expect(c.nats).toBeNull();
    expect(c.http).toMatchObject({ port: 3000, host: '127.0.0.1', tls: null, allowInsecureHttp: false });
    expect(Object.isFrozen(c.http)).toBe(true);
  });

  it('resolves a relative DATA_DIR against the project root, not the current directory', () => {
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const cwd = process.cwd();
    process.chdir(dirname(THIS_FILE));
    try {
      const dataDir = (env: Record<string, string>) => {
        const c = loadConfig(env).database;
        return c.kind === 'pglite' ? c.dataDir : null;
      };
      expect(dataDir({})).toBe(join(root, 'data'));
      expect(dataDir({ DATA_DIR: 'var/db' })).toBe(join(root, 'var/db'));
      expect(dataDir({ DATA_DIR: '/srv/mailtally' })).toBe('/srv/mailtally');
    } finally {
      process.chdir(cwd);
    }
  });

  it('uses the real servers when both URLs are set', () => {
    const c = loadConfig({ DATABASE_URL: 'postgres://u@db:5432/x', NATS_URL: 'nats://a:4222,nats://b:4222' });
    expect(c.database).toMatchObject({ kind: 'postgres', url: 'postgres://u@db:5432/x' });
    expect(c.nats).toMatchObject({ servers: ['nats://a:4222', 'nats://b:4222'], stream: 'MAIL_EVENTS', subjectPrefix: 'mail.events' });
  });

  it('reports every bad value by name, all at once', () => {
    const found = problems({
      PORT: 'abc',
      DATABASE_URL: 'mysql://x',
      LOG_LEVEL: 'loud',
      WEBHOOK_RETRY_SCHEDULE: '5,soon',
      INGEST_BATCH_SIZE: '0',
      ALLOW_INSECURE_HTTP: 'maybe',
      NATS_SUBJECT_PREFIX: 'mail..events',
    });
    expect(found).toHaveLength(7);
    for (const name of ['PORT', 'DATABASE_URL', 'LOG_LEVEL', 'WEBHOOK_RETRY_SCHEDULE', 'INGEST_BATCH_SIZE', 'ALLOW_INSECURE_HTTP', 'NATS_SUBJECT_PREFIX']) {
      expect(found.some((p) => p.startsWith(`${name} `))).toBe(true);
    }
    expect(found.find((p) => p.startsWith('PORT'))).toBe('PORT must be a whole number (got "abc")');
  });

  it('refuses a NATS_URL that names no server (nats.js would connect to its default instead)', () => {
    for (const value of [',', ' , ,', ',,']) {
      expect(problems({ NATS_URL: value })).toEqual([`NATS_URL must name at least one server, e.g. nats://127.0.0.1:4222 (got ${JSON.stringify(value)})`]);
    }
    expect(loadConfig({ NATS_URL: ',nats://a:4222,' }).nats?.servers).toEqual(['nats://a:4222']);
  });

  it('never echoes secrets back', () => {
    const found = problems({ DATABASE_URL: 'nope://user:hunter2@x', PORT: '1' });
    expect(found.join('\n')).not.toContain('hunter2');
    // A NATS_URL it refuses is shown without its passwords and tokens.
    const nats = problems({ NATS_URL: 'nats://ingest:hunter2@nats1:4222,http://hunter3@nats2:4222,nats://hunter4@nats3:4222' });
    expect(nats).toHaveLength(1);
    expect(nats[0]).toContain('nats://ingest@nats1:4222');
    expect(nats[0]).toContain('nats://***@nats3:4222');
    expect(nats.join('\n')).not.toMatch(/hunter[234]/);
  });

  it('needs TLS_CERT and TLS_KEY together', () => {
    expect(problems({ TLS_CERT: THIS_FILE })).toEqual(['TLS_CERT and TLS_KEY must be set together']);
  });

  it('checks at once that TLS_CERT and TLS_KEY name files it can read, holding a certificate and its key', () => {
    const cert = TLS('cert.pem');
    const key = TLS('key.pem');
    expect(loadConfig({ TLS_CERT: cert, TLS_KEY: key }).http.tls).toEqual({ certFile: cert, keyFile: key });
    expect(problems({ TLS_CERT: THIS_FILE, TLS_KEY: THIS_FILE })).toEqual([expect.stringMatching(/^TLS_CERT and TLS_KEY are not a PEM certificate and its private key: .+/)]);
    expect(problems({ TLS_CERT: cert, TLS_KEY: cert })).toEqual([expect.stringMatching(/^TLS_CERT and TLS_KEY are not a PEM certificate and its private key: .+/)]);
    expect(problems({ TLS_CERT: '/nonexistent/cert.pem', TLS_KEY: dirname(THIS_FILE) })).toEqual([
      'TLS_CERT names no file (got "/nonexistent/cert.pem")',
      `TLS_KEY must be a file, not a directory (got ${JSON.stringify(dirname(THIS_FILE))})`,
    ]);
  });

  it('trusts no proxy by default, and names them by address, CIDR or preset', () => {
    expect(loadConfig({}).http.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).http.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.5, 172.16.0.0/12,loopback, fd00::/8' }).http.trustProxy).toEqual(['10.0.0.5', '172.16.0.0/12', 'loopback', 'fd00::/8']);
    expect(problems({ TRUST_PROXY: 'true' })).toEqual([expect.stringMatching(/^TRUST_PROXY .*"true" is not an IP address or CIDR/)]);
    expect(problems({ TRUST_PROXY: '2' })).toEqual([expect.stringMatching(/^TRUST_PROXY .*"2" is not an IP address or CIDR/)]);
    expect(problems({ TRUST_PROXY: '10.0.0.0/33' })).toEqual([expect.stringMatching(/invalid prefix length/)]);
    expect(problems({ TRUST_PROXY: 'proxy.internal' })).toEqual([expect.stringMatching(/not an IP address or CIDR/)]);
  });

  it('treats empty values as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: ' ' }).http.port).toBe(3000);
  });

  it('parses the replay settings: set-based by default, its memory a Postgres size', () => {
    expect(loadConfig({}).projector).toMatchObject({ replayEngine: 'sql', replayWorkMem: undefined });
    expect(loadConfig({ REPLAY_ENGINE: 'fold', REPLAY_WORK_MEM: '64MB' }).projector).toMatchObject({ replayEngine: 'fold', replayWorkMem: '64MB' });
    const found = problems({ REPLAY_ENGINE: 'magic', REPLAY_WORK_MEM: "64MB'; DROP TABLE events; --" });
    expect(found.some((p) => p.startsWith('REPLAY_ENGINE '))).toBe(true);
    expect(found.some((p) => p.startsWith('REPLAY_WORK_MEM '))).toBe(true);
  });

  it('parses the webhook settings', () => {
    const c = loadConfig({ WEBHOOK_ALLOWLIST: '127.0.0.1/32, hooks.local', WEBHOOK_RETRY_SCHEDULE: '1,2.5,10' });
    expect(c.webhooks).toMatchObject({ allowList: ['127.0.0.1/32', 'hooks.local'], retryScheduleSeconds: [1, 2.5, 10] });
  });

  it('bounds each retry delay (30 days), naming the setting', () => {
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '5,2592000' }).webhooks.retryScheduleSeconds).toEqual([5, 2_592_000]);
    expect(problems({ WEBHOOK_RETRY_SCHEDULE: '5,2592001' })).toEqual([expect.stringMatching(/^WEBHOOK_RETRY_SCHEDULE must be comma-separated seconds of at most 2592000 \(30 days\) each/)]);
    expect(problems({ WEBHOOK_RETRY_SCHEDULE: '3000000' })).toHaveLength(1);
  });

  it('refuses a retry schedule of nothing but zeros (a window of no time: a URL would die at its first failed retry)', () => {
    for (const schedule of ['0', '0,0.0']) {
      expect(problems({ WEBHOOK_RETRY_SCHEDULE: schedule })).toEqual([expect.stringMatching(/^WEBHOOK_RETRY_SCHEDULE must give some time to retry/)]);
    }
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '0,1' }).webhooks.retryScheduleSeconds).toEqual([0, 1]);
  });
});
