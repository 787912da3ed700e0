import { seededRng } from '../../bench/support/generate.js';
import type { Window } from './api-probe.js';
import type { PrivateNats } from './private-nats.js';
import type { PrivatePostgres } from './private-postgres.js';
import { sleep } from './processes.js';
import type { RoleName, RoleProcesses } from './role-processes.js';

/**
 * Faults at seeded-random points of the event stream, one at a time: SIGKILL and restart of
 * each role process, Postgres stopped (fast or immediate) and started again, NATS killed and
 * started again on the same store, and a projector and a dispatcher frozen past their leases
 * while a second one takes over, then thawed beside it (a zombie holder) before being killed. Every kind comes once per round, in a shuffled order, each at
 * a random position of the stream. The producer is held back from passing the next fault's
 * position until the current fault is over, so events keep flowing through every fault however
 * slowly the machine restarts things. Postgres outages are recorded as windows.
 */

export type FaultKind = RoleName | 'postgres-fast' | 'postgres-immediate' | 'nats' | 'projector-frozen' | 'dispatcher-frozen';
const KINDS: readonly FaultKind[] = ['ingest', 'projector', 'dispatcher', 'api', 'postgres-fast', 'postgres-immediate', 'nats', 'projector-frozen', 'dispatcher-frozen'];

export interface FaultRecord {
  kind: FaultKind;
  /** Stream position (messages published) when it began. */
  position: number;
  /** ms since the schedule started: when the fault began and when everything was back. */
  at: number;
  back: number;
  downMs: number;
}

export interface FaultTargets {
  roles: RoleProcesses;
  postgres: PrivatePostgres;
  nats: PrivateNats;
}

export class FaultSchedule {
  readonly done: FaultRecord[] = [];
  /** Wall-clock windows (ms) while Postgres was stopping, down or starting. */
  readonly postgresDown: Window[] = [];
  readonly plan: { kind: FaultKind; position: number; downMs: number }[] = [];
  readonly #finished: Promise<void>[] = [];
  readonly #finish: (() => void)[] = [];

  /** `leaseMs`: the roles' lease (a frozen process stays frozen past it). */
  constructor(seed: number, rounds: number, messages: number, private readonly leaseMs = 2000) {
    const r = seededRng(seed ^ 0xfa17);
    const kinds: FaultKind[] = [];
    for (let round = 0; round < rounds; round++) {
      const order = [...KINDS];
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(r() * (i + 1));
        [order[i], order[j]] = [order[j] as FaultKind, order[i] as FaultKind];
      }
      kinds.push(...order);
    }
    const positions = kinds.map(() => Math.floor(messages * (0.05 + 0.9 * r()))).sort((a, b) => a - b);
    for (const [i, kind] of kinds.entries()) {
      this.plan.push({ kind, position: positions[i] as number, downMs: Math.round(kind.startsWith('postgres') ? 1000 + r() * 3000 : r() * 2500) });
      this.#finished.push(new Promise((resolve) => this.#finish.push(resolve)));
    }
  }

  /** For the producer: resolves when message `index` may be published (the faults before it are over). */
  gate(index: number): Promise<void> | null {
    // Fault j must be over before the stream passes fault j+1's position.
    let j = -1;
    while (j + 1 < this.plan.length - 1 && (this.plan[j + 2] as { position: number }).position <= index) j++;
    return j >= 0 && this.done.length <= j ? (this.#finished[j] as Promise<void>) : null;
  }

  /** Runs each fault once `published()` reaches its position. */
  async run(t: FaultTargets, published: () => number, graceMs: number, log: (line: string) => void = () => {}): Promise<void> {
    const t0 = Date.now();
    for (const [i, step] of this.plan.entries()) {
      while (published() < step.position) await sleep(20);
      const at = Date.now();
      switch (step.kind) {
        case 'postgres-fast':
        case 'postgres-immediate': {
          await t.postgres.restart(step.kind === 'postgres-fast' ? 'fast' : 'immediate', step.downMs);
          this.postgresDown.push({ from: at, to: Date.now() + graceMs });
          break;
        }
        case 'nats':
          await t.nats.restart('SIGKILL', step.downMs);
          break;
        case 'projector-frozen':
        case 'dispatcher-frozen':
          await t.roles.pauseBesideStandby(step.kind === 'projector-frozen' ? 'projector' : 'dispatcher', this.leaseMs + 1000 + step.downMs);
          break;
        default:
          await t.roles.kill(step.kind, step.downMs);
      }
      const rec = { kind: step.kind, position: step.position, at: at - t0, back: Date.now() - t0, downMs: step.downMs };
      this.done.push(rec);
      this.#finish[i]?.();
      log(`fault ${rec.kind} at message ${rec.position} (${(rec.at / 1000).toFixed(1)} s), back at ${(rec.back / 1000).toFixed(1)} s`);
    }
  }
}
