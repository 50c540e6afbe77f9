/**
 * Batches handed from a producer to one consumer, one at a time: `push` resolves once the consumer
 * has taken the batch and asked for the next, so the producer never runs ahead by more than one
 * batch (back-pressure) and memory does not follow the data's size.
 */
export class BatchChannel<T> implements AsyncIterable<T> {
  private pending: { batch: T; taken: () => void } | null = null;
  private wake: (() => void) | null = null;
  private ended = false;
  private failure: Error | null = null;

  push(batch: T): Promise<void> {
    if (this.ended || this.failure) return Promise.reject(this.failure ?? new Error('the channel is closed'));
    return new Promise((taken) => {
      this.pending = { batch, taken };
      this.wake?.();
    });
  }

  /** No more batches: the consumer's loop ends after the last one. */
  end(): void {
    this.ended = true;
    this.wake?.();
  }

  /** The consumer's loop throws `err` (e.g. the producer failed: the consumer gives up its work). */
  fail(err: Error): void {
    this.failure = err;
    this.pending?.taken();
    this.pending = null;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.pending) {
        const { batch, taken } = this.pending;
        this.pending = null;
        yield batch;
        taken();
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
  }
}
