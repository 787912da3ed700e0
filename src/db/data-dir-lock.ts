import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
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

export function acquireDataDirLock(dataDir: string): () => void {
  const path = join(dataDir, DATA_DIR_PID_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number.parseInt(readFileSync(path, 'utf8'), 10);
      if (Number.isInteger(holder) && holder !== process.pid && isAlive(holder)) {
        throw new DataDirInUseError(dataDir, holder);
      }
      rmSync(path, { force: true }); // stale: its process is gone
    }
  }
  throw new Error(`Could not lock ${dataDir}`);
}
