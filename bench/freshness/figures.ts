import type { FigureInput } from '../support/result.js';

interface Percentiles {
  p50: number;
  p99: number;
}
interface FreshnessRun {
  probes: number;
  unseen: number;
  visible: Percentiles;
  /** Probes of the warm-up, not counted in `visible`. */
  warmupVisible: Percentiles;
  /** How long the warm-up lasted; whether the start-up backlog was cleared by then (else it reached its cap). */
  warmup?: { seconds: number; caughtUp: boolean };
  natsAck: Percentiles;
}

/** Whether some probe of a run became visible before it ended (else its percentiles are no figure). */
export const anyProbeVisible = (run: { probes: number; unseen: number }): boolean => run.unseen < run.probes;

/**
 * Per rate, publish → visible p50 and p99 beside the NATS publish → ack baseline. A run in which
 * no probe became visible before it ended has no figure (NaN, stored as null), not 0. The note
 * gives the warm-up's length and p99 per run (its probes are not in the figures).
 */
export function freshnessFigures(results: readonly { rate: number; achievedRate: number; perRun: readonly FreshnessRun[] }[]): FigureInput[] {
  return results.flatMap((r) => {
    const seen = (x: FreshnessRun, ms: number) => (anyProbeVisible(x) ? ms : NaN);
    const unseen = r.perRun.filter((x) => x.unseen > 0).map((x) => `${x.unseen}/${x.probes}`);
    const warmup = r.perRun.map((x) => `${x.warmupVisible.p99} ms`).join(' · ');
    const lengths = r.perRun.map((x) => (x.warmup === undefined ? '?' : `${x.warmup.seconds} s${x.warmup.caughtUp ? '' : ' (backlog not cleared)'}`)).join(' · ');
    const note = `publisher reached ${r.achievedRate}/s; warm-up ${lengths}, its p99 ${warmup}${unseen.length > 0 ? `; probes not visible by the end of a run: ${unseen.join(' · ')} (percentiles over the visible ones only)` : ''}`;
    return (['p50', 'p99'] as const).map((p) => ({
      name: `${r.rate}/s: publish → visible in the read model, ${p}`,
      unit: 'ms',
      better: 'lower' as const,
      perRun: r.perRun.map((x) => seen(x, x.visible[p])),
      baseline: { name: `NATS publish → ack, ${p}`, perRun: r.perRun.map((x) => seen(x, x.natsAck[p])) },
      note,
    }));
  });
}
