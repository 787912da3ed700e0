import { recordLoadedModules } from './loaded-modules.js';

/**
 * Run as a child process, `node --import tsx this-file <mode> <target>`; prints as JSON the
 * modules loaded after it starts recording:
 * - `connect <postgres url | pglite data dir>`: the database code loaded, a connection made as
 *   the service makes it, one query;
 * - `serve <roles>`: the service started with those roles (configured from the environment,
 *   as `mailtally serve` is), then stopped.
 */
const [mode, target = ''] = process.argv.slice(2);
const recorder = recordLoadedModules();
if (mode === 'connect') {
  const { connectDb } = await import('../../src/db/connect.js');
  const db = await connectDb(target.startsWith('postgres') ? { kind: 'postgres', url: target, poolSize: 1 } : { kind: 'pglite', dataDir: target });
  await db.kysely.selectNoFrom((eb) => eb.val(1).as('one')).execute();
  await db.close();
} else if (mode === 'serve') {
  const [{ loadConfig }, { createLogger }, { parseRoles, startService }] = await Promise.all([import('../../src/config.js'), import('../../src/logger.js'), import('../../src/main.js')]);
  const config = loadConfig();
  const service = await startService(config, parseRoles(target), createLogger('warn'));
  await service.stop();
} else {
  throw new Error(`unknown mode ${String(mode)}`);
}
process.stdout.write(JSON.stringify(await recorder.settle()));
