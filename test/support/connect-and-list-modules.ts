import { recordLoadedModules } from './loaded-modules.js';

// Run as a child process: `node --import tsx this-file <postgres url | pglite data dir>`. Loads the
// database code and connects as the service does, runs one query, and prints the modules
// loaded meanwhile as JSON.
const target = process.argv[2] ?? '';
const recorder = recordLoadedModules();
const { connectDb } = await import('../../src/db/connect.js');
const db = await connectDb(target.startsWith('postgres') ? { kind: 'postgres', url: target, poolSize: 1 } : { kind: 'pglite', dataDir: target });
await db.kysely.selectNoFrom((eb) => eb.val(1).as('one')).execute();
await db.close();
process.stdout.write(JSON.stringify(await recorder.settle()));
