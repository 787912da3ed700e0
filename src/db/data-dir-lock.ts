import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The lock's pid file, in the data directory beside the database's own files. */
export const DATA_DIR_PID_FILE = 'mailtally.pid';

/**
 * PGlite is an embedded database: two processes opening the same directory would corrupt it.
 * A pid file guards the directory and names the holder in the error.
 */
export class DataDirInUseError extends Error {
  constructor(dataDir: string, pid: number) {
    super(
      `The embedded database in ${dataDir} is in use by process ${pid} (${commandOf(pid)}). ` +
        'Stop that process first, or run against a shared Postgres by setting DATABASE_URL.',
    );
    this.name = 'DataDirInUseError';
  }
}

/** What process `pid` runs, as far as the system tells (Linux's /proc): `mailtally replay`, say. */
function commandOf(pid: number): string {
  let args: string[];
  try {
    args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
  } catch {
    return 'probably a mailtally command';
  }
  const bin = args.findIndex((a) => /(^|\/)mailtally(\.js)?$/.test(a));
  if (bin >= 0) return `\`mailtally${args[bin + 1] !== undefined ? ` ${args[bin + 1]}` : ''}\``;
  const line = args.join(' ');
  return `\`${line.length > 80 ? `${line.slice(0, 80)}…` : line}\``;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** How long a start waits for another's takeover of a stale lock (a few milliseconds' work) before giving up. */
const TAKEOVER_WAIT_MS = 2_000;

/**
 * Locks `dataDir` for this process; returns the release. The pid file appears whole and at once
 * (written aside, then hard-linked into place: `link` fails if the name exists), so no start ever
 * reads a half-written one. A file whose process is gone (killed, crashed) is taken over under a
 * second lock file made the same way, so of two starts that find it stale at the same moment one
 * replaces it (an atomic rename) and the other then finds it held.
 */
export function acquireDataDirLock(dataDir: string): () => void {
  const path = join(dataDir, DATA_DIR_PID_FILE);
  const mine = writeAside(path);
  try {
    const deadline = Date.now() + TAKEOVER_WAIT_MS;
    for (;;) {
      if (tryLink(mine, path)) break;
      const holder = pidIn(path);
      if (typeof holder === 'number' && holder !== process.pid && isAlive(holder)) throw new DataDirInUseError(dataDir, holder);
      // Stale (its process gone, or no pid in it), or let go of meanwhile (undefined: link again).
      if (holder !== undefined && takeOver(mine, path, holder)) break;
      if (Date.now() > deadline) throw new Error(`Could not lock ${dataDir}: another process kept taking over ${path}`);
      if (holder !== undefined) sleepSync(5);
    }
  } finally {
    rmSync(mine, { force: true });
  }
  return () => {
    if (pidIn(path) === process.pid) rmSync(path, { force: true });
  };
}

/** Replaces the stale pid file (holding `stale`: a pid, or null for unreadable text), if this start gets the takeover lock first. */
function takeOver(mine: string, path: string, stale: number | null): boolean {
  const takeover = `${path}.takeover`;
  if (!tryLink(mine, takeover)) {
    // Another start is taking over (a few milliseconds), or died doing so: its lock goes then.
    const other = pidIn(takeover);
    if (other !== undefined && (other === null || !isAlive(other))) rmSync(takeover, { force: true });
    return false;
  }
  try {
    // Still the file judged stale (no other start can replace it while this holds the takeover
    // lock, nor link a new one while it is there), so replacing it takes nobody's lock.
    if (pidIn(path) !== stale) return false;
    renameSync(mine, path);
    return true;
  } finally {
    rmSync(takeover, { force: true });
  }
}

/** This process's pid in a file of its own beside `path`, to be linked into place. */
function writeAside(path: string): string {
  const aside = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(aside, String(process.pid), { flag: 'wx' });
  return aside;
}

/** Gives `from` the name `to` unless `to` exists. */
function tryLink(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

/** The pid a lock file names: undefined if there is no such file, null if its text is no pid. */
function pidIn(path: string): number | null | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
