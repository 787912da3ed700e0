import net from 'node:net';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { freePort, runCli, stopAll } from '../support/processes.js';
import { createTestDatabase } from '../support/services.js';

/**
 * `mailtally serve` started with a bad setting: it exits 1 with a message naming the setting,
 * and a setting the HTTP server reads is refused before any database work (the fresh database
 * is left without even the migrations table).
 */

const drops: (() => Promise<void>)[] = [];
afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  for (const drop of drops) await drop();
});

async function freshDatabase(): Promise<string> {
  const database = await createTestDatabase();
  drops.push(database.drop);
  return database.url;
}

async function migrated(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ t: string | null }>("SELECT to_regclass('mailtally_migrations')::text AS t")).rows[0]?.t != null;
  } finally {
    await c.end();
  }
}

const serve = (env: Record<string, string>, roles = 'api') => runCli(['serve', '--roles', roles], { env: { LOG_LEVEL: 'warn', PORT: '0', ...env } });

describe('serve with a bad setting', () => {
  it('TLS_CERT / TLS_KEY naming no file: both named, before the database is touched', async () => {
    const url = await freshDatabase();
    const r = await serve({ DATABASE_URL: url, TLS_CERT: '/nonexistent/cert.pem', TLS_KEY: '/nonexistent/key.pem' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('TLS_CERT names no file (got "/nonexistent/cert.pem")');
    expect(r.stderr).toContain('TLS_KEY names no file (got "/nonexistent/key.pem")');
    expect(await migrated(url)).toBe(false);
  });

  it('plain HTTP off loopback: refused before the database is touched', async () => {
    const url = await freshDatabase();
    const r = await serve({ DATABASE_URL: url, HOST: '0.0.0.0' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/Refusing to serve plain HTTP on 0\.0\.0\.0/);
    expect(await migrated(url)).toBe(false);
  });

  it('a PORT already taken: PORT named, before the database is touched', async () => {
    const url = await freshDatabase();
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as net.AddressInfo).port;
    try {
      const r = await serve({ DATABASE_URL: url, PORT: String(port) });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`PORT / HOST: cannot listen on 127.0.0.1 port ${port}: `);
      expect(r.stderr).toContain('EADDRINUSE');
      expect(await migrated(url)).toBe(false);
    } finally {
      holder.close();
    }
  });

  it('Postgres not reachable: DATABASE_URL named with its URL, the password left out', async () => {
    const port = await freePort();
    const r = await serve({ DATABASE_URL: `postgres://mailtally:hunter2@127.0.0.1:${port}/nowhere` });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`DATABASE_URL: cannot connect to postgres://mailtally@127.0.0.1:${port}/nowhere: `);
    expect(r.stderr).toContain('ECONNREFUSED');
    expect(r.stderr).not.toContain('hunter2');
  });

  it('Postgres not reachable: a password given as a query parameter is masked', async () => {
    const port = await freePort();
    const r = await serve({ DATABASE_URL: `postgres://mailtally@127.0.0.1:${port}/nowhere?sslmode=disable&password=hunter2` });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`DATABASE_URL: cannot connect to postgres://mailtally@127.0.0.1:${port}/nowhere?sslmode=disable&password=***: `);
    expect(r.stderr).not.toContain('hunter2');
  });

  it('NATS not reachable: a token in NATS_URL is masked', async () => {
    const url = await freshDatabase();
    const port = await freePort();
    const r = await serve({ DATABASE_URL: url, NATS_URL: `nats://hunter2@127.0.0.1:${port}`, NATS_STREAM: 'MT_OPS_UNREACHABLE' }, 'ingest');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`NATS_URL: cannot connect to nats://***@127.0.0.1:${port}: `);
    expect(r.stderr).not.toContain('hunter2');
  });

  it('NATS not reachable: NATS_URL named with its servers', async () => {
    const url = await freshDatabase();
    const port = await freePort();
    const r = await serve({ DATABASE_URL: url, NATS_URL: `nats://someone:hunter2@127.0.0.1:${port}`, NATS_STREAM: 'MT_OPS_UNREACHABLE' }, 'ingest');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`NATS_URL: cannot connect to nats://someone@127.0.0.1:${port}: `);
    expect(r.stderr).not.toContain('hunter2');
  });
});
