import { stopProgressBars } from './progress.js';

/**
 * Ctrl-C for a command that goes through a file in batches (import, publish), from the moment
 * its reading starts: the first stops the reading, and what was read is still written, counted
 * and summed up; the second quits at once. Either way the progress bar gives the terminal back
 * its cursor. Before the reading (connecting, migrating) Ctrl-C quits as usual.
 */
export class CtrlC {
  readonly #controller = new AbortController();
  readonly #command: string;
  /** What a rerun counts of what is stored already, for the messages. */
  readonly #rerun: string;
  #watching = false;
  /** The reading loop left the file before its end. */
  #stoppedEarly = false;

  constructor(command: string, rerun = 'what is stored already counts as Duplicates') {
    this.#command = command;
    this.#rerun = rerun;
  }

  readonly #onSigint = () => {
    stopProgressBars();
    if (this.#controller.signal.aborted) {
      console.error(`\nInterrupted: what was in flight may or may not be stored; run ${this.#command} again (${this.#rerun}).`);
      process.exit(130);
    }
    console.error('\nStopping: what was read is still written (Ctrl-C again to quit at once)…');
    this.#controller.abort();
  };

  /** Starts listening, as the reading begins (the signal also ends waits within the loop). */
  watch(): AbortSignal {
    if (!this.#watching) process.on('SIGINT', this.#onSigint);
    this.#watching = true;
    return this.#controller.signal;
  }

  /** Asked by the reading loop before each line: true once Ctrl-C was pressed (the loop then leaves the file). */
  stopsReading(): boolean {
    if (this.#controller.signal.aborted) this.#stoppedEarly = true;
    return this.#stoppedEarly;
  }

  dispose(): void {
    process.off('SIGINT', this.#onSigint);
  }

  /** After the summary on stdout: says so and gives the exit code (130) if the reading stopped early, else null. */
  finish(): number | null {
    if (!this.#stoppedEarly) return null;
    console.error(`Interrupted: the summary above counts what was written; run ${this.#command} again for the rest (${this.#rerun}).`);
    return 130;
  }
}
