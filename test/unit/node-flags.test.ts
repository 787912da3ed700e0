import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runsWithServiceFlags, SERVICE_NODE_FLAGS } from '../../src/node-flags.js';

const root = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');

describe('the Node options the service runs with', () => {
  const flags = SERVICE_NODE_FLAGS.join(' ');

  it('are given by npm start, the mailtally command and the Docker image', () => {
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts['start']).toBe(`exec node ${flags} bin/mailtally.js serve`);
    expect(read('bin/mailtally.js').split('\n')[0]).toBe(`#!/usr/bin/env -S node ${flags}`);
    const entrypoint = /^ENTRYPOINT (.*)$/m.exec(read('Dockerfile'))?.[1];
    expect(JSON.parse(entrypoint ?? 'null')).toEqual(['node', ...SERVICE_NODE_FLAGS, 'bin/mailtally.js']);
  });

  it('start the mailtally command when it is run by its shebang (node refuses an option it does not know)', () => {
    const usage = execFileSync(new URL('bin/mailtally.js', root).pathname, ['--help'], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
    expect(usage).toContain('serve [--roles');
  });

  it('are recognised on the command line or in NODE_OPTIONS, and missed when absent', () => {
    expect(runsWithServiceFlags([...SERVICE_NODE_FLAGS], '')).toBe(true);
    expect(runsWithServiceFlags([], `--enable-source-maps ${flags}`)).toBe(true);
    expect(runsWithServiceFlags(['--max-semi-space-size=16'], '')).toBe(false);
    expect(runsWithServiceFlags([], '')).toBe(false);
  });
});
