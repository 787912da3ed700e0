import { sleep } from './processes.js';

/**
 * A client loop against a running read API: keeps calling a rotation of paths (each with its
 * tenant's credentials) and records every call's start, end and status — or the network error
 * when no answer came (the API process being down is not a 5xx).
 */

export interface ProbeCall {
  path: string;
  start: number;
  end: number;
  status: number | null;
  error?: string;
}

export interface ProbeTarget {
  path: string;
  authorization?: string;
}

export class ApiProbe {
  readonly calls: ProbeCall[] = [];
  #stopped = false;
  #loops: Promise<void>[] = [];

  constructor(
    private readonly baseUrl: string,
    private readonly targets: readonly ProbeTarget[],
    private readonly opts: { concurrency?: number; pauseMs?: number; timeoutMs?: number } = {},
  ) {}

  start(): void {
    const n = this.opts.concurrency ?? 2;
    for (let i = 0; i < n; i++) this.#loops.push(this.#loop(i));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }

  async #loop(offset: number): Promise<void> {
    let i = offset;
    while (!this.#stopped) {
      const t = this.targets[i++ % this.targets.length] as ProbeTarget;
      const start = Date.now();
      try {
        const res = await fetch(`${this.baseUrl}${t.path}`, {
          headers: t.authorization !== undefined ? { authorization: t.authorization } : {},
          signal: AbortSignal.timeout(this.opts.timeoutMs ?? 15_000),
        });
        await res.arrayBuffer();
        this.calls.push({ path: t.path, start, end: Date.now(), status: res.status });
      } catch (err) {
        const cause = (err as { cause?: { code?: string } }).cause?.code;
        this.calls.push({ path: t.path, start, end: Date.now(), status: null, error: cause ?? (err as Error).name });
        await sleep(100);
      }
      await sleep(this.opts.pauseMs ?? 10);
    }
  }
}

export interface Window {
  from: number;
  to: number;
}

/** Calls answered 5xx that overlap none of `windows` (a call overlaps when it was in flight during one). */
export function fiveHundredsOutside(calls: readonly ProbeCall[], windows: readonly Window[]): ProbeCall[] {
  return calls.filter((c) => c.status !== null && c.status >= 500 && !windows.some((w) => c.start <= w.to && c.end >= w.from));
}
