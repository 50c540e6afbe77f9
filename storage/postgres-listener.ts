import pg from 'pg';

const RECONNECT_MS = 1_000;

/**
 * LISTEN on one dedicated connection (a pooled one would drop its subscriptions when it is
 * returned). A lost connection is reopened and every listener woken, since notifications sent
 * while it was down are gone: listeners treat a wake as "look again", never as the news itself.
 */
export class PostgresListener {
  private client: pg.Client | undefined;
  private connecting: Promise<pg.Client> | undefined;
  private readonly listeners = new Map<string, Set<() => void>>();
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  private connections = 0;
  private current: number | undefined;

  constructor(private readonly config: pg.ClientConfig) {}

  async listen(channel: string, wake: () => void): Promise<() => Promise<void>> {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      try {
        const client = await this.connect();
        await client.query(`listen ${pg.escapeIdentifier(channel)}`);
      } catch (err) {
        this.listeners.delete(channel);
        throw err;
      }
    }
    set.add(wake);
    return async () => {
      set.delete(wake);
    };
  }

  /**
   * Which connection notifications arrive on now (a new number for each connection opened), or
   * undefined while none is open: a listener that needs to know it missed nothing compares it to
   * the one it saw before (notifications sent while no connection listened are gone).
   */
  get connection(): number | undefined {
    return this.current;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    this.current = undefined;
    await client?.end().catch(() => undefined);
  }

  private connect(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= (async () => {
      const client = new pg.Client(this.config);
      client.on('notification', (message) => this.listeners.get(message.channel)?.forEach((wake) => wake()));
      client.on('error', () => this.lost(client));
      client.on('end', () => this.lost(client));
      await client.connect();
      for (const channel of this.listeners.keys()) await client.query(`listen ${pg.escapeIdentifier(channel)}`);
      this.client = client;
      this.current = this.connections += 1;
      return client;
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private lost(client: pg.Client) {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    this.current = undefined;
    const reopen = () => {
      if (this.closed) return;
      this.connect().then(
        () => this.listeners.forEach((set) => set.forEach((wake) => wake())),
        () => (this.retry = setTimeout(reopen, RECONNECT_MS)),
      );
    };
    this.retry = setTimeout(reopen, RECONNECT_MS);
  }
}
