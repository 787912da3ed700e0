import cliProgress from 'cli-progress';

/**
 * The bars' ETA: cli-progress gives 'INF' / 'NULL' while it cannot tell yet, which its own
 * formatter turns into "NFs" / "LLs"; those show as "…".
 */
export const formatEta: cliProgress.TimeFormatter = (t, options, roundToMultipleOf) =>
  typeof t === 'number' && Number.isFinite(t) ? cliProgress.Format.TimeFormat(t, options, roundToMultipleOf) : '…';

export interface Progress {
  update(bytes: number, counters: Record<string, number>): void;
  stop(): void;
}

/** The bars running, so that a Ctrl-C can stop them and give the terminal its cursor back. */
const running = new Set<Progress>();

/** Stops every bar startProgress started (each stops once; later updates are ignored). */
export function stopProgressBars(): void {
  for (const p of [...running]) p.stop();
}

/**
 * A progress bar on stderr (bytes of the input, events/s, ETA); when stderr is not a terminal,
 * a plain line every few seconds instead.
 */
export function startProgress(label: string, totalBytes: number): Progress {
  const inner = progressOn(label, totalBytes);
  let stopped = false;
  const p: Progress = {
    update: (bytes, c) => {
      if (!stopped) inner.update(bytes, c);
    },
    stop: () => {
      if (stopped) return;
      stopped = true;
      running.delete(p);
      inner.stop();
    },
  };
  running.add(p);
  return p;
}

function progressOn(label: string, totalBytes: number): Progress {
  const started = Date.now();
  const rate = (events: number) => Math.round(events / Math.max((Date.now() - started) / 1000, 0.001));
  if (process.stderr.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format: `${label} |{bar}| {percentage}% | {mb}/{totalMb} MB | {events} events | {rate} ev/s | ETA {eta_formatted}`,
        hideCursor: true,
        formatTime: formatEta,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(totalBytes, 0, { mb: '0.0', totalMb: (totalBytes / 1e6).toFixed(1), events: 0, rate: 0 });
    return {
      update: (bytes, c) => bar.update(bytes, { mb: (bytes / 1e6).toFixed(1), events: c['events'] ?? 0, rate: rate(c['events'] ?? 0) }),
      stop: () => bar.stop(),
    };
  }
  let last = Date.now();
  return {
    update: (bytes, c) => {
      if (Date.now() - last < 5000) return;
      last = Date.now();
      const pct = totalBytes > 0 ? Math.round((100 * bytes) / totalBytes) : 100;
      process.stderr.write(`${label}: ${pct}% (${c['events'] ?? 0} events, ${rate(c['events'] ?? 0)} ev/s)\n`);
    },
    stop: () => {},
  };
}
