// Entry point of an ingest worker thread (see src/ingest/ingest-workers.ts): loads the
// TypeScript sources through tsx, like bin/mailtally.js does for the main thread.
import { register } from 'tsx/esm/api';

register();
await import('../src/ingest/ingest-worker.ts');
