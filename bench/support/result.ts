import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { median, RESULTS_DIR, sourceVersion } from '../ingest/report.js';
import { calibrateMachine, describeMachineCalibration, type MachineCalibration } from './calibration.js';
import { machineLoad, sampleMachine } from './proc.js';

/**
 * The structured result every benchmark writes beside its console table and its detailed JSON:
 * `bench/results/<bench>.json`, the latest run of that benchmark, which `bench/report.ts`
 * renders into BENCHMARKS.md.
 */

export interface Figure {
  name: string;
  unit: string;
  /** Median of `perRun` (runs without a figure, NaN, stored as null, left out). */
  value: number;
  perRun: number[];
  /** The same-run baseline, measured in each run beside the figure. */
  baseline: { name: string; value: number; perRun: number[] } | null;
  /** Median of the per-run ratios figure / baseline (each run against its own baseline). */
  ratio: number | null;
  better: 'higher' | 'lower';
  note?: string;
}

export interface BenchResult {
  bench: string;
  startedAt: string;
  finishedAt: string;
  params: Record<string, unknown>;
  /** Load averages (1, 5, 15 min) at start and end; the share of all cores busy (anyone's work) and CPU pressure in between. */
  load: { start: number[]; end: number[]; busy: number; cpuPressure: number };
  source: ReturnType<typeof sourceVersion>;
  /** The machine the benchmark ran on (absent from results recorded before it was kept). */
  machine?: MachineFacts;
  /** The machine's speed at fixed work (compute, loopback round trips) when the benchmark started and ended (absent from older results). */
  calibration?: { start: MachineCalibration; end: MachineCalibration };
  figures: Figure[];
  notes: string[];
}

export interface MachineFacts {
  cpu: string;
  cores: number;
  memoryGiB: number;
}

export function machineFacts(): MachineFacts {
  const cpu = cpus();
  return { cpu: cpu[0]?.model ?? '?', cores: cpu.length, memoryGiB: round2(totalmem() / 2 ** 30) };
}

export function describeMachine(m: MachineFacts): string {
  return `${m.cpu}, ${m.cores} cores, ${m.memoryGiB.toFixed(1)} GiB`;
}

export interface FigureInput {
  name: string;
  unit: string;
  perRun: number[];
  baseline?: { name: string; perRun: number[] };
  better?: 'higher' | 'lower';
  note?: string;
}

export function figure(f: FigureInput): Figure {
  const ratios = f.baseline !== undefined ? f.perRun.map((x, i) => x / (f.baseline?.perRun[i] ?? NaN)).filter(Number.isFinite) : [];
  return {
    name: f.name,
    unit: f.unit,
    value: median(f.perRun.filter(Number.isFinite)),
    perRun: f.perRun,
    baseline: f.baseline !== undefined ? { ...f.baseline, value: median(f.baseline.perRun.filter(Number.isFinite)) } : null,
    ratio: ratios.length > 0 ? median(ratios) : null,
    better: f.better ?? 'higher',
    ...(f.note !== undefined ? { note: f.note } : {}),
  };
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** "calibration at the start: compute …, loopback …; at the end: …" (results from before the loopback figure have compute alone). */
export function describeCalibrations(c: { start: MachineCalibration; end: MachineCalibration }): string {
  return `calibration at the start: ${describeMachineCalibration(c.start)}; at the end: ${describeMachineCalibration(c.end)}`;
}

/** Call when a benchmark starts (it measures the machine's speed first, a second or two); `write` when it has its figures. */
export async function startResult(bench: string) {
  const calibrationStart = await calibrateMachine();
  process.stderr.write(`${bench}: machine ${describeMachine(machineFacts())}; calibration ${describeMachineCalibration(calibrationStart)}\n`);
  const startedAt = new Date();
  const loadStart = loadavg().map(round2);
  const machineStart = sampleMachine();
  // The code measured is what the benchmark loaded (and spawned) from here on.
  const source = sourceVersion();
  return {
    async write(params: Record<string, unknown>, figures: FigureInput[], notes: string[] = []): Promise<string> {
      const machine = machineLoad(machineStart, sampleMachine());
      const calibration = { start: calibrationStart, end: await calibrateMachine() };
      const result: BenchResult = {
        bench,
        startedAt: startedAt.toISOString(),
        finishedAt: new Date().toISOString(),
        params,
        load: { start: loadStart, end: loadavg().map(round2), busy: round2(machine.busy), cpuPressure: round2(machine.cpuPressure) },
        source,
        machine: machineFacts(),
        calibration,
        figures: figures.map(figure),
        notes,
      };
      mkdirSync(RESULTS_DIR, { recursive: true });
      const path = `${RESULTS_DIR}${bench}.json`;
      writeFileSync(path, `${JSON.stringify(result, null, 2)}\n`);
      return path;
    },
  };
}
