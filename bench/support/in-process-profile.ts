import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

/**
 * CPU profile of this process while `fn` runs (for benchmarks whose product code runs in the
 * bench process itself), written as a `.cpuprofile` file that `summarizeCpuProfile` reads.
 */
export async function withCpuProfile<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    try {
      return await fn();
    } finally {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(file, JSON.stringify(profile));
    }
  } finally {
    session.disconnect();
  }
}
