import crypto from 'node:crypto';

/** The counter stays a small integer (V8 keeps it untagged: no float arithmetic per id); past it, a new random part is drawn. */
const COUNTER_LIMIT = 2 ** 30;

/**
 * The ids given to requests that bring none: UUIDs (RFC 9562 version 8, whose bits are the maker's
 * to define) made of a random part (90 bits) and a counter, the last 8 hex digits. The random part
 * is drawn when the process starts and again every 2^30 ids, so the ids of one process never
 * repeat, and two instances' ids collide as two random 90-bit numbers would. A request id names a
 * request in logs and problem answers, and clients may send their own: it is not a secret, so it
 * need not be unpredictable. (A version 4 UUID per request, 16 random bytes formatted one digit at a
 * time, was about 1.5 % of the instructions of a cached API Service answer.)
 */
export class RequestIds {
  private prefix = '';
  private counter = 0;

  constructor() {
    this.draw();
  }

  next(): string {
    if (this.counter === COUNTER_LIMIT) this.draw();
    return this.prefix + (this.counter++).toString(16).padStart(8, '0');
  }

  private draw(): void {
    const random = crypto.randomBytes(12).toString('hex');
    const variant = ((parseInt(random[22], 16) & 0x3) | 0x8).toString(16); // RFC 9562: the bits 10xx
    this.prefix = `${random.slice(0, 8)}-${random.slice(8, 12)}-8${random.slice(12, 15)}-${variant}${random.slice(15, 18)}-${random.slice(18, 22)}`;
    this.counter = 0;
  }
}
