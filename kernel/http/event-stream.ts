import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { HttpProblem, problemBody } from '../problem.ts';
import { reply, type Reply } from '../route.ts';

/** One Server-Sent Event: its name and its data, sent as JSON. */
export interface ServerSentEvent {
  event: string;
  data: unknown;
}

const encoded = ({ event, data }: ServerSentEvent) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * An answer of Server-Sent Events read from `events`. The first event is awaited before answering:
 * a refusal before anything is sent is a problem answer, not a stream. A failure midway ends the
 * stream with an `error` event holding the problem (anything but a problem is logged and told as a
 * 502 saying `failed`). A client gone destroys the body, which returns `events`: the work behind it stops.
 */
export async function eventStream(events: AsyncIterator<ServerSentEvent>, options: { requestId: string; log: Logger; failed: string }): Promise<Reply> {
  const first = await events.next();
  async function* body(): AsyncGenerator<string> {
    let next = first;
    try {
      while (!next.done) {
        yield encoded(next.value);
        next = await events.next();
      }
    } catch (err) {
      if (!(err instanceof HttpProblem)) options.log.error({ err }, 'a streamed answer failed midway');
      yield encoded({ event: 'error', data: problemBody(err instanceof HttpProblem ? err : new HttpProblem(502, options.failed), options.requestId) });
    } finally {
      await events.return?.(undefined);
    }
  }
  return reply(200, Readable.from(body()), { 'Content-Type': 'text/event-stream; charset=utf-8', 'X-Accel-Buffering': 'no' });
}
