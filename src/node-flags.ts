/**
 * The V8 options the service runs with, wherever it is started: `npm start`, the `mailtally`
 * command (its shebang), the Docker image, the benchmarks and the end-to-end tests.
 * `test/unit/node-flags.test.ts` holds those places to this list.
 *
 * `--max-semi-space-size=32` (MiB; Node 20's default is 16): a larger young generation, meant so
 * that fewer of the objects a batch allocates (rows read, events, folded states, write arrays) are
 * still alive at a scavenge and get copied into the old generation, where only the slower
 * mark-compact frees them. Measured in the freshness benchmark at 5k events/s (bench/README.md,
 * Freshness): the stalls that set the visible p99 came with the collector's pauses, and this
 * option with a smaller projector group cache took the median p99 of nine alternated pairs of
 * runs from 140 ms to 74 ms. It costs at most 32 MiB more memory per process.
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];

/** Whether this process was started with every one of SERVICE_NODE_FLAGS (on its command line or in NODE_OPTIONS). */
export function runsWithServiceFlags(execArgv: readonly string[] = process.execArgv, nodeOptions: string = process.env['NODE_OPTIONS'] ?? ''): boolean {
  const given = new Set([...execArgv, ...nodeOptions.split(/\s+/).filter((a) => a !== '')]);
  return SERVICE_NODE_FLAGS.every((f) => given.has(f));
}
