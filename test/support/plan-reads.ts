import { CompiledQuery, type Kysely, type KyselyPlugin, type PluginTransformQueryArgs } from 'kysely';

/**
 * What the statements an API request sent read, by their plans: a kysely plugin keeps each
 * statement as it goes through (`openApiFixture({ plugins: [recorder.plugin] })`), and `explain`
 * runs one again under EXPLAIN (ANALYZE, FORMAT JSON) with the same parameters.
 */
export interface StatementRecorder {
  readonly plugin: KyselyPlugin;
  /** The statements sent since the last call, compiled as they were sent; forgets them. */
  take<DB>(db: Kysely<DB>): CompiledQuery[];
}

export function statementRecorder(): StatementRecorder {
  let sent: PluginTransformQueryArgs[] = [];
  return {
    plugin: {
      transformQuery: (args) => {
        sent.push(args);
        return args.node;
      },
      transformResult: async (args) => args.result,
    },
    take: (db) => {
      const compiled = sent.map((s) => db.getExecutor().compileQuery(s.node, s.queryId));
      sent = [];
      return compiled;
    },
  };
}

/** A node of an EXPLAIN (FORMAT JSON) plan, with the fields read here. */
export type PlanNode = Record<string, unknown> & { Plans?: PlanNode[] };

/** The plan of `statement` as it ran (EXPLAIN ANALYZE: the statement is executed). */
export async function explainAnalyze<DB>(db: Kysely<DB>, statement: CompiledQuery): Promise<PlanNode> {
  const r = await db.executeQuery<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(CompiledQuery.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement.sql}`, [...statement.parameters]));
  const plan = r.rows[0]?.['QUERY PLAN'][0]?.Plan;
  if (plan === undefined) throw new Error(`no plan for ${statement.sql}`);
  return plan;
}

/** Every node of the plan, the root first. */
export function planNodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(planNodes)];
}

/**
 * The rows the plan read from `table`'s heap (or index, for an index-only scan): those it
 * returned and those its filter or a bitmap's recheck set aside, over every loop.
 */
export function rowsRead(plan: PlanNode, table: string): number {
  let read = 0;
  for (const node of planNodes(plan)) {
    if (node['Relation Name'] !== table) continue;
    const perLoop = Number(node['Actual Rows']) + Number(node['Rows Removed by Filter'] ?? 0) + Number(node['Rows Removed by Index Recheck'] ?? 0);
    read += perLoop * Number(node['Actual Loops'] ?? 1);
  }
  return read;
}
