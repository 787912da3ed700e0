import cliProgress from 'cli-progress';
import { findProjection, PROJECTIONS, type Projection } from '../../projections/index.js';
import type { Config } from '../config.js';
import { connectDb } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { withSchemaLock } from '../db/schema-lock.js';
import { replay, type ReplayPhase, type ReplayProgress } from '../projector/replay.js';
import { ensureProjectionTables } from '../projector/tables.js';
import { formatEta } from './progress.js';

const PHASE_LABELS: Record<ReplayPhase, string> = {
  read: 'reading the log  ',
  build: 'building tables  ',
  fold: 'folding          ',
  write: 'writing tables   ',
  index: 'indexing         ',
  'catch-up': 'catching up      ',
  wait: 'waiting for locks',
  swap: 'swapping in      ',
};
const UNITS: Record<ReplayPhase, string> = { read: 'positions', build: 'tables and indexes', fold: 'groups', write: 'rows', index: 'indexes', 'catch-up': 'positions', wait: 's', swap: 'step' };

/** `mailtally replay [--projection a,b]`: rebuild read models from the log, with progress. */
export async function runReplay(config: Config, only: string | undefined): Promise<number> {
  const projections = selectProjections(only);
  const db = await connectDb(config.database, { application: 'mailtally:replay' });
  const bar = phaseBars();
  // Ctrl-C: the rebuild stops after the statement or read in progress, drops its work tables and
  // lets go of its read models, so it can be run again at once. A second Ctrl-C quits at once
  // (the read models are then let go within a minute), once its connections are ended on the
  // server (a second at most; Postgres would run their statements to their end); a third does
  // not wait.
  const stopping = new AbortController();
  let quitting = false;
  const interrupted = () => {
    bar.stop();
    if (quitting) process.exit(130);
    if (stopping.signal.aborted) {
      quitting = true;
      console.error('\nInterrupted: the live tables are untouched; run replay again to rebuild (this run lets go of its read models within a minute).');
      void db.terminateConnections(1000).finally(() => process.exit(130));
      return;
    }
    console.error('\nStopping after the current step (Ctrl-C again to quit at once)…');
    stopping.abort();
  };
  // A SIGTERM (a supervisor, `timeout`, a CI run cancelled) stops it as a Ctrl-C does: its work tables and leases go at once.
  process.on('SIGINT', interrupted);
  process.on('SIGTERM', interrupted);
  try {
    await withSchemaLock(db, async () => {
      await migrateToLatest(db.kysely);
      await ensureProjectionTables(db.kysely, PROJECTIONS);
    });
    const started = Date.now();
    const report = await replay(db, projections, {
      readBatch: config.projector.replayBatchSize,
      counterEntries: config.projector.replayCounterRows,
      engine: config.projector.replayEngine,
      workMem: config.projector.replayWorkMem,
      catchUpBatch: config.projector.batchSize,
      onProgress: (p) => bar.update(p),
      signal: stopping.signal,
    }).catch((err: unknown) => {
      if (!stopping.signal.aborted) throw err;
      return null;
    });
    bar.stop();
    if (report === null) {
      console.error('Interrupted: the live tables are untouched; run replay again to rebuild.');
      return 130;
    }
    const seconds = (Date.now() - started) / 1000;
    if ((report.behind ?? 0) > config.projector.batchSize) {
      console.error(
        `The catch-up stopped gaining on the appends: swapped in at position ${report.position}, ${report.behind} positions behind the head; the live projector applies them (its lag is in GET /status).`,
      );
    }
    console.log(
      JSON.stringify({
        projections: report.projections,
        position: Number(report.position),
        events: report.events,
        groups: report.groups,
        rows: report.rows,
        counterSpills: report.spills,
        behind: report.behind ?? 0,
        seconds: Number(seconds.toFixed(1)),
        eventsPerSecond: Math.round(report.events / Math.max(seconds, 0.001)),
      }),
    );
    return 0;
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    bar.stop();
    await db.close();
  }
}

/** The projections `--projection` names (every one without it); an unknown or empty name throws, naming the projections. */
export function selectProjections(only: string | undefined): Projection[] {
  if (only === undefined) return [...PROJECTIONS];
  const names = only.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (names.length === 0) throw new Error(`--projection needs a projection name (several comma-separated); projections are ${PROJECTIONS.map((p) => p.name).join(', ')}`);
  const unknown = names.filter((n) => findProjection(n) === undefined);
  if (unknown.length > 0) {
    throw new Error(`Unknown projection ${unknown.map((n) => `"${n}"`).join(', ')}; projections are ${PROJECTIONS.map((p) => p.name).join(', ')}`);
  }
  // Registry order: the swap locks tables in the same order as a live projector.
  return PROJECTIONS.filter((p) => names.includes(p.name));
}

/**
 * One bar per phase on a terminal; a line every few seconds otherwise. A phase that gives way to
 * the next has ended: its bar is drawn full, its count printed in full, but for a wait (its
 * total is a limit), which shows what it waits for instead, and a catch-up (it ends near the
 * head, or where it stopped gaining on the appends), which shows its last count. A phase whose
 * `done` grows steadily shows its rate and ETA; one counted in statements of unequal lengths
 * (`gauge` 'steps') its count and the time spent; one that cannot count until it ends ('none')
 * its size and the time spent.
 */
export function phaseBars(tty = process.stderr.isTTY): { update(p: ReplayProgress): void; stop(): void } {
  let current: ReplayProgress | null = null;
  let bar: cliProgress.SingleBar | null = null;
  let lastLine = 0;
  let printedDone = -1;
  let phaseStarted = Date.now();
  let stopped = false;
  const rateOf = (done: number) => Math.round(done / Math.max((Date.now() - phaseStarted) / 1000, 0.001));
  const line = (p: ReplayProgress, done: number) => {
    lastLine = Date.now();
    printedDone = done;
    const count = p.gauge === 'none' && done < p.total ? '…' : `${done}/${p.total}`;
    const pace = p.gauge === undefined ? `${rateOf(done)}/s` : `${Math.round((Date.now() - phaseStarted) / 1000)} s`;
    const what = p.phase === 'wait' ? ` ${UNITS.wait}: ${p.waitingFor ?? '?'}` : ` (${pace})`;
    process.stderr.write(`replay: ${PHASE_LABELS[p.phase].trim()} ${count}${what}\n`);
  };
  // Without a terminal, a phase that counts nothing for a while still shows it is working.
  const heartbeat = tty
    ? null
    : setInterval(() => {
        if (current !== null && Date.now() - lastLine > 5000) line(current, current.done);
      }, 1000).unref();
  const stop = () => {
    bar?.stop();
    bar = null;
  };
  return {
    update(p) {
      if (stopped) return;
      const previous = current;
      if (p.phase !== previous?.phase) {
        // A wait does not end on its full count (its total is a limit), nor a catch-up (it ends
        // near the head, or where it stopped gaining on the appends), nor a swap that goes on to
        // wait for its locks (its try timed out): its last count stands.
        if (previous !== null && previous.phase !== 'wait') {
          const last = previous.phase === 'catch-up' || (previous.phase === 'swap' && p.phase === 'wait') ? previous.done : previous.total;
          if (bar !== null) bar.update(last);
          else if (printedDone !== last) line(previous, last);
        }
        stop();
        phaseStarted = Date.now();
        printedDone = -1;
        lastLine = Date.now();
        if (tty) {
          bar = new cliProgress.SingleBar({ format: barFormat(p), hideCursor: true, formatTime: formatEta }, cliProgress.Presets.shades_classic);
          bar.start(Math.max(p.total, 1), 0, { rate: 0, waitingFor: '' });
        } else {
          process.stderr.write(`replay: ${PHASE_LABELS[p.phase].trim()} (${p.total} ${UNITS[p.phase]})\n`);
        }
      }
      current = p;
      if (bar !== null) {
        bar.setTotal(Math.max(p.total, 1));
        bar.update(p.done, { rate: rateOf(p.done), waitingFor: p.waitingFor ?? '' });
      } else if (Date.now() - lastLine > 5000 || (p.phase === 'wait' && p.waitingFor !== previous?.waitingFor)) {
        line(p, p.done);
      }
    },
    stop: () => {
      stopped = true;
      if (heartbeat !== null) clearInterval(heartbeat);
      stop();
    },
  };
}

function barFormat(p: ReplayProgress): string {
  const label = PHASE_LABELS[p.phase];
  if (p.phase === 'wait') return `${label} |{bar}| {value}/{total} ${UNITS.wait} | {waitingFor}`;
  if (p.gauge === 'none') return `${label} | ${p.total} ${UNITS[p.phase]} | {duration_formatted} so far`;
  if (p.gauge === 'steps') return `${label} |{bar}| {percentage}% | {value}/{total} ${UNITS[p.phase]} | {duration_formatted} so far`;
  return `${label} |{bar}| {percentage}% | {value}/{total} ${UNITS[p.phase]} | {rate}/s | ETA {eta_formatted}`;
}
