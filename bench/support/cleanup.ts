/**
 * Undo steps run last-in first-out, once each, on success, failure or Ctrl-C, so a benchmark
 * never leaves scratch databases, streams or child processes behind.
 */
export class Cleanup {
  #steps: { name: string; run: () => Promise<void> }[] = [];
  #interrupted = false;

  /** A signal arrived: what fails from now on fails because its resources are being removed. */
  get interrupted(): boolean {
    return this.#interrupted;
  }

  /** Registers a step; the returned function runs it now (and forgets it). */
  add(name: string, run: () => Promise<void>): () => Promise<void> {
    const step = { name, run };
    this.#steps.push(step);
    return async () => {
      this.#steps = this.#steps.filter((s) => s !== step);
      await run();
    };
  }

  async runAll(): Promise<void> {
    while (this.#steps.length > 0) {
      const step = this.#steps.pop();
      if (step === undefined) break;
      try {
        await step.run();
      } catch (err) {
        console.error(`cleanup: ${step.name} failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }

  /** Runs every step and exits on SIGINT / SIGTERM; returns the function that removes the handlers. */
  onSignals(): () => void {
    const handler = (signal: NodeJS.Signals) => {
      this.#interrupted = true;
      console.error(`\n${signal}: cleaning up`);
      void this.runAll().finally(() => process.exit(130));
    };
    process.once('SIGINT', handler);
    process.once('SIGTERM', handler);
    return () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    };
  }
}
