/**
 * Batches handed from a producer to one consumer, in order, with back-pressure: `push` resolves
 * once the batch may be left to the channel, which is when fewer than `ahead` batches wait before
 * the consumer, or else once the consumer is done with it (has asked for the next). The producer
 * never runs more than `ahead` batches ahead of the consumer (0: each push waits for its batch to
 * be consumed), so memory does not follow the data's size.
 */
export class BatchChannel<T> implements AsyncIterable<T> {
  /** Batches the consumer has not taken yet, in order; `release` resolves the push of each. */
  private readonly waiting: { batch: T; release: () => void; refuse: (err: Error) => void }[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  private failure: Error | null = null;

  constructor(private readonly ahead = 0) {}

  push(batch: T): Promise<void> {
    if (this.ended || this.failure) return Promise.reject(this.failure ?? new Error('the channel is closed'));
    return new Promise((release, refuse) => {
      this.waiting.push({ batch, release, refuse });
      if (this.waiting.length <= this.ahead) release();
      this.wake?.();
    });
  }

  /** No more batches: the consumer's loop ends after the last one. */
  end(): void {
    this.ended = true;
    this.wake?.();
  }

  /** The consumer's loop throws `err` (e.g. the producer failed: the consumer gives up its work); pushes waiting resolve. */
  fail(err: Error): void {
    this.failure = err;
    for (const { release } of this.waiting.splice(0)) release();
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    let current: (typeof this.waiting)[number] | undefined;
    try {
      for (;;) {
        if (this.failure) throw this.failure;
        current = this.waiting.shift();
        if (current) {
          // The batch waiting at the edge of the window may now be left to the channel.
          this.waiting[this.ahead - 1]?.release();
          yield current.batch;
          current.release();
          current = undefined;
          continue;
        }
        if (this.ended) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = null;
      }
    } finally {
      // The consumer stopped before the end (it failed, say): the producer's pushes must not wait forever.
      if (!this.failure && !(this.ended && this.waiting.length === 0)) {
        this.failure = new Error('the consumer of the batches stopped');
        current?.refuse(this.failure);
        for (const { refuse } of this.waiting.splice(0)) refuse(this.failure);
      }
    }
  }
}
