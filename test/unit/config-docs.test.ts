import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_KEYS } from '../../src/config.js';

/** .env.example and README's configuration table list every setting src/config.ts reads. */

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

describe('configuration docs', () => {
  it('.env.example has a line for every setting (commented out when it has no default)', () => {
    const example = read('.env.example');
    const listed = new Set([...example.matchAll(/^(?:# )?([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]));
    expect(CONFIG_KEYS.filter((k) => !listed.has(k))).toEqual([]);
    expect([...listed].filter((k) => k !== undefined && !CONFIG_KEYS.includes(k))).toEqual([]);
  });

  it("README's configuration table names every setting", () => {
    const readme = read('README.md');
    const table = readme.slice(readme.indexOf('### Configuration'), readme.indexOf('\n## ', readme.indexOf('### Configuration')));
    const rows = table.split('\n').filter((l) => l.startsWith('| `'));
    const named = new Set(rows.flatMap((row) => [...(row.split(' | ')[0] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1])));
    expect(CONFIG_KEYS.filter((k) => !named.has(k))).toEqual([]);
  });
});
