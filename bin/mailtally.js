#!/usr/bin/env -S node --max-semi-space-size=32
// Entry point of the `mailtally` command: runs the TypeScript sources through tsx's loader,
// so a fresh clone works right after `npm install` with no build step.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
