import { SERVICE_NODE_FLAGS } from '../../src/node-flags.js';

/**
 * The arguments after `node` that start `mailtally <args>` as the product starts it: the
 * service's Node options, then `nodeArgs` (a profiler, an experiment's V8 option), then the
 * command. Relative to the repository root, which the benchmarks spawn from.
 */
export function mailtallyArgv(args: readonly string[], nodeArgs: readonly string[] = []): string[] {
  return [...SERVICE_NODE_FLAGS, ...nodeArgs, 'bin/mailtally.js', ...args];
}
