import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { PROJECTIONS } from '../../projections/index.js';
import { mailtallyArgv } from '../support/service.js';
import { NATS_URL } from '../support/scratch.js';

/** The service under test (`serve --roles ingest,projector`, its own process): start, stop, and waiting for its projector. */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function startService(databaseUrl: string, stream: string, subjectPrefix: string, profileDir: string | null): ChildProcess {
  const env = { ...process.env, DATABASE_URL: databaseUrl, NATS_URL, NATS_STREAM: stream, NATS_SUBJECT_PREFIX: subjectPrefix, NATS_CONSUMER: `fresh-${stream}`, PORT: '0', LOG_LEVEL: 'warn', NODE_OPTIONS: '' };
  const profile = profileDir !== null ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const child = spawn(process.execPath, mailtallyArgv(['serve', '--roles', 'ingest,projector'], profile), { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
  return child;
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** Waits until every projection's checkpoint is at the log's head, then analyzes every table. */
export async function foldedAndAnalyzed(poll: pg.Client): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    const { rows } = await poll.query<{ behind: boolean }>({
      text: 'SELECT (SELECT min(position) FROM checkpoints WHERE name = ANY($1)) < (SELECT max(position) FROM events) AS behind',
      values: [PROJECTIONS.map((p) => p.name)],
    });
    if (rows[0]?.behind === false) {
      await poll.query('ANALYZE');
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the projector did not fold the prefilled log within 300 s');
}

export async function waitForProjector(poll: pg.Client): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const { rows } = await poll.query<{ n: number }>("SELECT count(*)::int AS n FROM leases WHERE name LIKE 'projection:%' AND expires_at > now()");
    if ((rows[0]?.n ?? 0) > 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the projector did not start within 60 s');
}
