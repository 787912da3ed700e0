import type { KyselyPlugin } from 'kysely';

/** A kysely plugin that counts the statements sent through it (`db.withPlugin(counter.plugin)`). */
export function queryCounter(): { plugin: KyselyPlugin; readonly count: number; reset(): void } {
  let count = 0;
  return {
    plugin: {
      transformQuery: (args) => {
        count += 1;
        return args.node;
      },
      transformResult: async (args) => args.result,
    },
    get count() {
      return count;
    },
    reset: () => {
      count = 0;
    },
  };
}
