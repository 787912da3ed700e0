/** What every benchmark accepts from `tsx bench/run.ts <name> [--events N] [--runs R] [--profile]`. */
export interface BenchOptions {
  /** Events to generate; each benchmark has its own default. */
  readonly events: number | undefined;
  /** Repetitions of each phase (medians are reported). */
  readonly runs: number;
  /** Write CPU profiles of the product's processes and summarize them. */
  readonly profile: boolean;
}

export type Bench = (opts: BenchOptions) => Promise<void>;
