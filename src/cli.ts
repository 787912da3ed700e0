import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config.js';
import { isDatabaseAway } from './db/errors.js';
import { isApiKeyId } from './events/schema.js';
import { UsageError } from './cli/usage-error.js';

/** The `mailtally` command. */

/** Events per write of `import`: more holds more in memory (300000: 816 MB against 277 MB at 5000) for little speed. */
const MAX_IMPORT_BATCH = 50_000;

const USAGE = `Usage: mailtally <command> [options]

Commands:
  serve [--roles api,ingest,projector,dispatcher]
                                 run the service (default: all four roles)
  migrate                        bring the database schema up to date
  keys create [--read-only]      create an API key; prints {"APIKeyID","ApiKey","SecretKey","ReadOnly"}
  keys list                      every API key (JSON lines; no secrets)
  keys revoke <APIKeyID|ApiKey>  the key stops authenticating (its data is kept)
  publish <file.jsonl> [--api-key-id N] [--url URL]
                                 send events to NATS, or to HTTP ingest when NATS_URL is unset
                                 (at --url, by default http(s)://HOST:PORT, as the tenant of
                                 MAILTALLY_API_KEY; --api-key-id is for NATS)
  import <file.jsonl> [--api-key-id N] [--batch-size N]
                                 load events straight into the log, in bulk
                                 (--batch-size: events per write, default 5000, at most ${MAX_IMPORT_BATCH})
  replay [--projection name[,name]]
                                 rebuild read models from the log (all by default), then swap them in
  dead-letters [--limit N]       list rejected input with its reasons (JSON lines): the
                                 newest N (default 100), printed oldest first

Exit codes:
  0    done
  1    failed: a bad setting, a server not reachable, an error while running
  2    the command line is wrong: unknown command or option, an option or argument the
       command does not take, an option given twice, a missing or bad value, a file that
       is not there, an import --api-key-id that names no key, a file whose first event
       carries no APIKeyID given to import or to publish over NATS without --api-key-id,
       publish --url with NATS_URL set (this text follows the message; nothing has been done)
  3    import / publish went through the file but left lines out: rejected by import
       (counted in its summary, listed with their reasons by dead-letters) or skipped
       by publish (each listed with its reason in its summary)
  130  stopped by Ctrl-C: replay (the live tables untouched), import or publish (the
       summary counts what was written; run it again for the rest)

\`mailtally <command> --help\` (or \`mailtally help <command>\`) tells more of one command.
Configuration comes from environment variables (see .env.example).`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values, tokens } = parseArguments(argv);
  const [command, ...rest] = positionals;
  if (values.version && command === undefined) {
    console.log(version());
    return 0;
  }
  if (values.help || command === 'help') {
    // `mailtally import --help`, `mailtally help import`: that command's own; else the overview.
    const about = command === 'help' ? rest[0] : command;
    const { COMMAND_HELP } = await import('./cli/command-help.js');
    if (about !== undefined && !Object.hasOwn(COMMAND_HELP, about)) throw new UsageError(`No help for "${about}": not a command`);
    console.log(about !== undefined ? COMMAND_HELP[about] : USAGE);
    return 0;
  }
  if (command === undefined) throw new UsageError('Give a command');
  checkCommandLine(command, rest, tokens);
  const config = loadConfig();
  // Each command's code is loaded when it runs: `serve` never loads the importer, nor a one-off command the service.
  switch (command) {
    case 'serve': {
      const roles = values.roles;
      if (roles !== undefined) {
        const { parseRoles } = await import('./main.js');
        asUsageError(() => parseRoles(roles));
      }
      return (await import('./cli/serve.js')).runServe(config, roles);
    }
    case 'migrate':
      return (await import('./cli/migrate.js')).runMigrate(config);
    case 'keys': {
      const keys = await import('./cli/keys.js');
      if (rest[0] === 'create') return keys.runKeysCreate(config, values['read-only']);
      if (rest[0] === 'list') return keys.runKeysList(config);
      return keys.runKeysRevoke(config, rest[1] as string);
    }
    case 'publish': {
      const apiKeyId = apiKeyIdFlag(values['api-key-id']);
      const publish = await import('./cli/publish.js');
      const url = values.url;
      if (url !== undefined) asUsageError(() => publish.checkPublishUrl(url));
      // Over HTTP the events are the credentials' tenant's: a flag naming another would be ignored.
      if (apiKeyId !== undefined && config.nats === null) {
        throw new UsageError('publish --api-key-id names the tenant on NATS only; without NATS_URL the events go to the tenant of MAILTALLY_API_KEY');
      }
      // And with NATS nothing goes over HTTP: --url would be ignored.
      if (url !== undefined && config.nats !== null) throw new UsageError('publish --url names the HTTP ingest, used without NATS_URL only; with NATS_URL set the events go to NATS');
      const file = requireFile(rest[0], 'publish');
      if (config.nats !== null && apiKeyId === undefined) await requireTenant(file, 'publish');
      return publish.runPublish(config, file, { apiKeyId, url });
    }
    case 'import': {
      // The flags first, then the file: each refused before any database work.
      const opts = {
        apiKeyId: apiKeyIdFlag(values['api-key-id']),
        batchSize: values['batch-size'] !== undefined ? positiveInt(values['batch-size'], '--batch-size', MAX_IMPORT_BATCH) : 5000,
      };
      const file = requireFile(rest[0], 'import');
      if (opts.apiKeyId === undefined) await requireTenant(file, 'import');
      return (await import('./cli/import.js')).runImport(config, file, opts);
    }
    case 'replay': {
      const replay = await import('./cli/replay.js');
      asUsageError(() => replay.selectProjections(values.projection));
      return replay.runReplay(config, values.projection);
    }
    case 'dead-letters':
      return (await import('./cli/dead-letters.js')).runDeadLetters(config, values.limit !== undefined ? positiveInt(values.limit, '--limit') : 100);
    default:
      throw new UsageError(`Unknown command "${command}"`);
  }
}

/** The package's version, from package.json beside src/. */
function version(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

function requireFile(file: string | undefined, command: string): string {
  if (file === undefined) throw new UsageError(`${command}: give the path of a .jsonl file (one event per line)`);
  // Before any database work (an embedded one takes seconds to open, a first one to create).
  try {
    if (statSync(file).isDirectory()) throw new UsageError(`${command}: ${file} is a directory; give the path of a .jsonl file (one event per line)`);
    accessSync(file, constants.R_OK);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : err instanceof Error ? err.message : String(err);
    throw new UsageError(`${command}: cannot read ${file}: ${why}`);
  }
  return file;
}

/** Without --api-key-id, a file whose first event names no tenant is refused before any work (each of its lines would be). */
async function requireTenant(file: string, command: string): Promise<void> {
  const { firstLineWithoutTenant } = await import('./cli/jsonl.js');
  const lineNo = await firstLineWithoutTenant(file);
  if (lineNo !== null) throw new UsageError(`${command}: line ${lineNo} of ${file} has no APIKeyID: pass --api-key-id N for a file whose events carry none, or put APIKeyID in each event`);
}

function positiveInt(text: string, flag: string, max = Number.MAX_SAFE_INTEGER): number {
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`${flag} must be a positive whole number (got ${JSON.stringify(text)})`);
  if (n > max) throw new UsageError(`${flag} must be at most ${max} (got ${text})`);
  return n;
}

function apiKeyIdFlag(text: string | undefined): string | undefined {
  if (text !== undefined && !isApiKeyId(text)) throw new UsageError(`--api-key-id must be a positive 64-bit integer (got ${JSON.stringify(text)})`);
  return text;
}

/** Each command's options (besides --help) and how many arguments follow its name. */
const COMMANDS: Record<string, { options: readonly string[]; args: number }> = {
  serve: { options: ['roles'], args: 0 },
  migrate: { options: [], args: 0 },
  keys: { options: ['read-only'], args: 2 },
  publish: { options: ['api-key-id', 'url'], args: 1 },
  import: { options: ['api-key-id', 'batch-size'], args: 1 },
  replay: { options: ['projection'], args: 0 },
  'dead-letters': { options: ['limit'], args: 0 },
};

/** An option of another command, or an argument too many, is a usage error naming it (it was ignored before). */
function checkCommandLine(command: string, rest: string[], tokens: ReturnType<typeof parseArguments>['tokens']): void {
  const spec = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (spec === undefined) throw new UsageError(`Unknown command "${command}"`);
  for (const token of tokens) {
    if (token.kind !== 'option' || token.name === 'help' || spec.options.includes(token.name)) continue;
    const takes = spec.options.length === 0 ? 'no options' : spec.options.map((o) => `--${o}`).join(', ');
    throw new UsageError(`${command} does not take --${token.name} (it takes ${takes})`);
  }
  if (command === 'keys') return checkKeysCommandLine(rest, tokens);
  const extra = rest[spec.args];
  if (extra === undefined) return;
  if (command === 'publish' || command === 'import') throw new UsageError(`${command} takes one file (got ${JSON.stringify(extra)} too)`);
  throw new UsageError(`${command} does not take ${JSON.stringify(extra)}`);
}

/** `keys create [--read-only]`, `keys list`, `keys revoke <APIKeyID|ApiKey>`. */
function checkKeysCommandLine(rest: string[], tokens: ReturnType<typeof parseArguments>['tokens']): void {
  const [sub, arg, extra] = rest;
  if (sub !== 'create' && sub !== 'list' && sub !== 'revoke') {
    throw new UsageError(`keys: ${sub === undefined ? 'give a subcommand' : `unknown subcommand ${JSON.stringify(sub)}`}: \`keys create [--read-only]\`, \`keys list\` or \`keys revoke <APIKeyID|ApiKey>\``);
  }
  if (sub !== 'create' && tokens.some((t) => t.kind === 'option' && t.name === 'read-only')) throw new UsageError(`keys ${sub} does not take --read-only`);
  if (sub === 'revoke') {
    if (arg === undefined || arg === '') throw new UsageError('keys revoke: give the APIKeyID or the ApiKey of the key to revoke');
    if (extra !== undefined) throw new UsageError(`keys revoke takes one key (got ${JSON.stringify(extra)} too)`);
    return;
  }
  if (arg !== undefined) throw new UsageError(`keys ${sub} does not take ${JSON.stringify(arg)}`);
}

/**
 * One parse of the options of every command; an unknown one, one without its value, or one given
 * twice (the parser would keep the last silently) is a usage error (exit 2). checkCommandLine
 * then holds each command to its own.
 */
function parseArguments(argv: string[]) {
  const parsed = parseOptions(argv);
  const seen = new Set<string>();
  for (const t of parsed.tokens) {
    if (t.kind !== 'option') continue;
    // Asking for help twice (`-h --help`) is still asking for help.
    if (seen.has(t.name) && t.name !== 'help') throw new UsageError(`--${t.name} is given twice${t.name === 'projection' ? '; name several read models in one: --projection a,b' : ''}`);
    seen.add(t.name);
  }
  return parsed;
}

function parseOptions(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      tokens: true,
      options: {
        roles: { type: 'string' },
        'read-only': { type: 'boolean', default: false },
        'api-key-id': { type: 'string' },
        'batch-size': { type: 'string' },
        limit: { type: 'string' },
        url: { type: 'string' },
        projection: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
        version: { type: 'boolean', short: 'v', default: false },
      },
    });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) throw err;
    // Node's own text goes on about positional arguments after `--`, which no command takes.
    const unknown = code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /^Unknown option '([^']+)'/.exec((err as Error).message)?.[1] : undefined;
    throw new UsageError(unknown !== undefined ? `Unknown option ${unknown}` : (err as Error).message);
  }
}

function asUsageError<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) console.error(`${err.message}\n\n${USAGE}`);
    else if (err instanceof ConfigError) console.error(err.message);
    else if (isDatabaseAway(err) && !(err instanceof Error && err.message.startsWith('DATABASE_URL'))) {
      // A connection that broke while the command ran (one never made is reported at connect, naming DATABASE_URL).
      console.error(
        `mailtally: the database connection broke (${err instanceof Error ? err.message : String(err)}): is the server at DATABASE_URL up? ` +
          'Each write commits whole or not at all (a replay swaps its read models in only whole), so running the command again is safe.',
      );
    } else console.error(`mailtally: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
