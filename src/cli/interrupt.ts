import { stopProgressBars } from './progress.js';

/**
 * Ctrl-C for a command that goes through a file in batches (import, publish): the first stops
 * the reading, and what was read is still written, counted and summed up; the second quits at
 * once. Either way the progress bar gives the terminal back its cursor.
 */
export interface CtrlC {
  /** Aborted at the first Ctrl-C: the command's loop reads no further. */
  readonly signal: AbortSignal;
  dispose(): void;
}

export function stopReadingOnCtrlC(command: string): CtrlC {
  const controller = new AbortController();
  const onSigint = () => {
    stopProgressBars();
    if (controller.signal.aborted) {
      console.error(`\nInterrupted: what was in flight may or may not be stored; run ${command} again (what is stored already counts as Duplicates).`);
      process.exit(130);
    }
    console.error('\nStopping: what was read is still written (Ctrl-C again to quit at once)…');
    controller.abort();
  };
  process.on('SIGINT', onSigint);
  return { signal: controller.signal, dispose: () => process.off('SIGINT', onSigint) };
}

/** The last words of a run Ctrl-C stopped, after its summary on stdout. */
export function sayInterrupted(command: string): void {
  console.error(`Interrupted: the summary above counts what was written; run ${command} again for the rest (what is stored already counts as Duplicates).`);
}
