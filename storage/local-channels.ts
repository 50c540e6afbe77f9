import { EventEmitter } from 'node:events';

/**
 * Notification channels of one process, for the embedded database: SQLite has one process writing
 * a file, so nobody else needs waking. A notification raised inside a transaction reaches listeners
 * at once; what they read then waits for the single connection, so it sees the committed change.
 */
export class LocalChannels {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  notify(channel: string): void {
    this.emitter.emit(channel);
  }

  listen(channel: string, wake: () => void): () => Promise<void> {
    this.emitter.on(channel, wake);
    return async () => void this.emitter.off(channel, wake);
  }
}
