import { randomBytes } from 'node:crypto';
import net from 'node:net';
import pg from 'pg';

/**
 * Where the tests find real Postgres and NATS: DATABASE_URL / NATS_URL when set, else the local
 * default ports (global-setup.ts starts containers when neither is there and Docker is).
 */
export const ADMIN_DATABASE_URL = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

export function reachable(url: string, defaultPort: number, timeoutMs = 1500): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: u.hostname, port: Number(u.port || defaultPort) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export const uniqueName = (prefix: string): string => `${prefix}_${randomBytes(5).toString('hex')}`;

/** Runs `work` on a connection of its own to `url`, closed after it. */
export async function withClient<T>(url: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

/**
 * A fresh database for one test file; `drop()` removes it (and kills its sessions). `options`
 * are appended to CREATE DATABASE (e.g. a template and a locale).
 */
export async function createTestDatabase(options = ''): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const name = uniqueName('mt_test');
  await withClient(ADMIN_DATABASE_URL, (admin) => admin.query(`CREATE DATABASE ${name} ${options}`));
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: async () => {
      await withClient(ADMIN_DATABASE_URL, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
