/**
 * Waits for one turn of the event loop. Loops that run query after query call it once per
 * round: on the embedded database (PGlite), every statement runs on this thread and its promise
 * settles without a turn, so a loop with work left (a projector or webhook fan-out catching up
 * on a backlog) would otherwise keep the thread for as long as the backlog lasts, and nothing
 * else would run meanwhile: no HTTP request, no timer (lease renewals, signals). On Postgres a
 * query's answer arrives in a turn of its own anyway, and the extra one costs microseconds.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
