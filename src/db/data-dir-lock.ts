import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
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

/** How long a start keeps trying while other starts take the lock over (a few milliseconds' work). */
const LOCK_TRIES_MS = 2_000;
/** How long an empty pid file counts as one being written (its pid follows its creation at once) before it counts as stale. */
const EMPTY_GRACE_MS = 500;

/**
 * Locks `dataDir` for this process; returns the release. The pid file is created exclusively
 * (`wx`), so of two starts one makes it; one found empty is being written and is read again.
 * A file whose process is gone (killed, crashed) is taken over by moving it aside (a rename,
 * which one start only can do to it) and making a new one, again exclusively: when two starts
 * find it stale at once, one moves it and makes its own, and the other, should its rename move
 * that new file instead, sees it is not the one it judged stale and puts it back, then finds the
 * directory held. Files the lock leaves behind all start with `mailtally.pid` (connect.ts
 * ignores them).
 */
export function acquireDataDirLock(dataDir: string): () => void {
  const path = join(dataDir, DATA_DIR_PID_FILE);
  const mine = String(process.pid);
  const deadline = Date.now() + LOCK_TRIES_MS;
  let emptySince: number | null = null;
  for (;;) {
    if (tryCreate(path, mine)) break;
    if (Date.now() > deadline) throw new Error(`Could not lock ${dataDir}: other processes kept taking ${path} over`);
    const text = readIfThere(path);
    if (text === undefined) continue; // let go of meanwhile: create again
    if (text === '') {
      emptySince ??= Date.now();
      if (Date.now() - emptySince < EMPTY_GRACE_MS) {
        sleepSync(5);
        continue;
      }
    }
    const holder = Number.parseInt(text, 10);
    if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) throw new DataDirInUseError(dataDir, holder);
    moveAsideIfStill(path, text);
  }
  return () => {
    if (readIfThere(path) === mine) rmSync(path, { force: true });
  };
}

/** Moves the pid file aside if it still holds `stale`; one made meanwhile by another start is put back. */
function moveAsideIfStill(path: string, stale: string): void {
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    renameSync(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // moved by another start
    throw err;
  }
  const moved = readIfThere(aside) ?? stale;
  // Another start's new lock, made since this one read the stale file: back in its place.
  if (moved !== stale) tryCreate(path, moved);
  rmSync(aside, { force: true });
}

/** Creates `path` holding `text` unless it exists. */
function tryCreate(path: string, text: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** The file's text, or undefined if there is no such file. */
function readIfThere(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
