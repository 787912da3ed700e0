import pg from 'pg';

/**
 * Every LISTEN of a process on one Postgres connection of its own (pg's pool cannot hold one:
 * a pooled client is handed to other queries between them). Channels are LISTENed while they
 * have a handler and UNLISTENed when their last one goes; the connection is opened with the
 * first channel and closed with the last.
 *
 * A lost connection is opened again (after 200 ms, then every second), every channel LISTENed
 * on it, and then every handler called once, since notifications may have been missed while it
 * was gone. A server that connects but refuses LISTEN (a standby in recovery) gets no
 * connection kept open for it.
 */
export class PgListener {
  /** channel → its handlers, each the wrapper made by one `listen` call. */
  readonly #channels = new Map<string, Set<() => void>>();
  #client: pg.Client | null = null;
  #retry: NodeJS.Timeout | null = null;
  /** Connecting, LISTEN and UNLISTEN run one at a time, in the order asked. */
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(
    private readonly url: string,
    private readonly application = 'mailtally:listen',
  ) {}

  /**
   * Calls `onNotify` for each NOTIFY on `channel` until the returned function is called.
   * Rejects, with nothing left registered, when the server cannot be reached or refuses LISTEN.
   */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>> {
    const handler = () => onNotify();
    return this.#serial(async () => {
      if (this.#closed) throw new Error('the LISTEN connection is closed');
      const client = this.#client ?? (await this.#connect());
      const handlers = this.#channels.get(channel);
      if (handlers === undefined) {
        try {
          await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        } catch (err) {
          // Refused (or the connection went meanwhile): a connection nobody listens on is not kept.
          if (this.#channels.size === 0) this.#drop(client);
          throw err;
        }
        this.#channels.set(channel, new Set([handler]));
      } else {
        handlers.add(handler);
      }
      return () => this.#unlisten(channel, handler);
    });
  }

  /** Stops every channel and closes the connection; later `listen` calls reject. */
  close(): Promise<void> {
    return this.#serial(async () => {
      this.#closed = true;
      this.#channels.clear();
      this.#stopRetrying();
      const c = this.#client;
      this.#client = null;
      await c?.end().catch(() => {});
    });
  }

  /** The channels LISTENed now (for tests and status). */
  get channels(): string[] {
    return [...this.#channels.keys()];
  }

  #unlisten(channel: string, handler: () => void): Promise<void> {
    return this.#serial(async () => {
      const handlers = this.#channels.get(channel);
      if (handlers === undefined || !handlers.delete(handler) || handlers.size > 0) return;
      this.#channels.delete(channel);
      const client = this.#client;
      if (this.#channels.size === 0) {
        this.#stopRetrying();
        this.#client = null;
        await client?.end().catch(() => {});
      } else {
        // A failure here means the connection is going; its reconnect LISTENs only the channels left.
        await client?.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => {});
      }
    });
  }

  #serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work, work);
    this.#queue = run.catch(() => {});
    return run;
  }

  /** Opens the connection and LISTENs every channel that has handlers; calls them all if any. */
  async #connect(): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: this.url, application_name: this.application });
    c.on('notification', (n) => {
      for (const h of this.#channels.get(n.channel) ?? []) h();
    });
    c.on('error', () => this.#lost(c));
    c.on('end', () => this.#lost(c));
    try {
      await c.connect();
      for (const channel of this.#channels.keys()) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      // Connected but refused LISTEN (a standby in recovery, say): close it, or every retry
      // would leave one more connection open.
      void c.end().catch(() => {});
      throw err;
    }
    this.#client = c;
    this.#stopRetrying();
    // Whatever was notified while there was no connection is lost: every handler looks again.
    for (const handlers of [...this.#channels.values()]) for (const h of [...handlers]) h();
    return c;
  }

  #drop(c: pg.Client): void {
    if (this.#client === c) this.#client = null;
    void c.end().catch(() => {});
  }

  #lost(c: pg.Client): void {
    if (this.#client !== c) return;
    this.#client = null;
    void c.end().catch(() => {});
    this.#scheduleReconnect(200);
  }

  #scheduleReconnect(ms: number): void {
    if (this.#closed || this.#retry !== null || this.#channels.size === 0) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      void this.#serial(async () => {
        if (this.#closed || this.#client !== null || this.#channels.size === 0) return;
        await this.#connect();
      }).catch(() => this.#scheduleReconnect(1000));
    }, ms);
  }

  #stopRetrying(): void {
    if (this.#retry !== null) clearTimeout(this.#retry);
    this.#retry = null;
  }
}
