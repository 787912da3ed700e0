import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config.js';

/** The `mailtally` command. */

const USAGE = `Usage: mailtally <command> [options]

Commands:
  serve [--roles api,ingest,projector,dispatcher]
                                 run the service (default: every available role)
  migrate                        bring the database schema up to date
  keys create [--read-only]      create an API key; prints {"APIKeyID","ApiKey","SecretKey","ReadOnly"}
  publish <file.jsonl> [--api-key-id N]
                                 send events to NATS (or to HTTP ingest when NATS_URL is unset)
  import <file.jsonl> [--api-key-id N] [--batch-size N]
                                 load events straight into the log, in bulk
  replay [--projection name[,name]]
                                 rebuild read models from the log (all by default), then swap them in
  dead-letters [--limit N]       list rejected input with its reasons (JSON lines)

Configuration comes from environment variables (see .env.example).`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      roles: { type: 'string' },
      'read-only': { type: 'boolean', default: false },
      'api-key-id': { type: 'string' },
      'batch-size': { type: 'string' },
      limit: { type: 'string' },
      url: { type: 'string' },
      projection: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    console.log(USAGE);
    return command === undefined && !values.help ? 1 : 0;
  }
  const config = loadConfig();
  // Each command's code is loaded when it runs: `serve` never loads the importer, nor a one-off command the service.
  switch (command) {
    case 'serve':
      return (await import('./cli/serve.js')).runServe(config, values.roles);
    case 'migrate':
      return (await import('./cli/migrate.js')).runMigrate(config);
    case 'keys':
      if (rest[0] !== 'create') throw new UsageError('keys: the only subcommand is `keys create [--read-only]`');
      return (await import('./cli/keys.js')).runKeysCreate(config, values['read-only']);
    case 'publish':
      return (await import('./cli/publish.js')).runPublish(config, requireFile(rest[0], 'publish'), { apiKeyId: values['api-key-id'], url: values.url });
    case 'import':
      return (await import('./cli/import.js')).runImport(config, requireFile(rest[0], 'import'), {
        apiKeyId: values['api-key-id'],
        batchSize: values['batch-size'] !== undefined ? positiveInt(values['batch-size'], '--batch-size') : 5000,
      });
    case 'replay':
      return (await import('./cli/replay.js')).runReplay(config, values.projection);
    case 'dead-letters':
      return (await import('./cli/dead-letters.js')).runDeadLetters(config, values.limit !== undefined ? positiveInt(values.limit, '--limit') : 100);
    default:
      throw new UsageError(`Unknown command "${command}"`);
  }
}

export class UsageError extends Error {}

function requireFile(file: string | undefined, command: string): string {
  if (file === undefined) throw new UsageError(`${command}: give the path of a .jsonl file (one event per line)`);
  return file;
}

function positiveInt(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag} must be a positive whole number`);
  return n;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) console.error(`${err.message}\n\n${USAGE}`);
    else if (err instanceof ConfigError) console.error(err.message);
    else console.error(`mailtally: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
