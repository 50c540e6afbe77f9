import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** One message the test SMTP server accepted. */
export interface ReceivedMail {
  /** Order of arrival, from 0. */
  seq: number;
  /** Envelope sender (MAIL FROM). */
  from: string;
  /** Envelope recipients (RCPT TO), lower-cased. */
  to: string[];
  /** The whole message as received (headers and encoded body). */
  raw: string;
  /** Header names lower-cased, folded lines joined. */
  headers: Record<string, string>;
  subject: string;
  /** The plain-text body, transfer encoding undone, line breaks normalised to \n. */
  text: string;
  /** The HTML alternative of a multipart/alternative message, decoded alike. */
  html?: string;
}

export interface TestSmtpServer {
  /** `smtp://127.0.0.1:<port>`: give it to the kernel as SMTP_URL. */
  url: string;
  port: number;
  readonly messages: readonly ReceivedMail[];
  /**
   * The first message (already received or arriving later) matching `predicate`; rejects after
   * `timeoutMs` (bounded wait).
   */
  waitFor(predicate: (mail: ReceivedMail) => boolean, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

function decodeQuotedPrintable(body: string): string {
  const softBreaksRemoved = body.replace(/=\r?\n/g, '');
  const bytes: number[] = [];
  for (let i = 0; i < softBreaksRemoved.length; i++) {
    const ch = softBreaksRemoved[i];
    const hex = softBreaksRemoved.slice(i + 1, i + 3);
    if (ch === '=' && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else {
      for (const b of Buffer.from(ch, 'utf8')) bytes.push(b);
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** A header value with its RFC 2047 encoded words (`=?UTF-8?Q?…?=`, `=?UTF-8?B?…?=`) decoded; the space between two of them goes. */
function decodeWords(value: string): string {
  return value.replace(/(=\?[^?]+\?[QqBb]\?[^?]*\?=)\s+(?==\?)/g, '$1').replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_, _charset: string, encoding: string, text: string) =>
    encoding.toUpperCase() === 'B' ? Buffer.from(text, 'base64').toString('utf8') : decodeQuotedPrintable(text.replace(/_/g, ' ')),
  );
}

/**
 * Splits a message into headers and a plain-text body (and the HTML alternative of a
 * multipart/alternative one: each part decoded on its own).
 */
export function parseMail(raw: string): { headers: Record<string, string>; text: string; html?: string } {
  const single = parsePart(raw);
  const boundary = /multipart\/[a-z]+;.*boundary="?([^";]+)"?/i.exec(single.headers['content-type'] ?? '')?.[1];
  if (!boundary) return single;
  const parts = raw.split(`--${boundary}`).slice(1, -1).map((part) => parsePart(part.replace(/^\r?\n/, '')));
  const of = (type: string) => parts.find((part) => (part.headers['content-type'] ?? '').toLowerCase().startsWith(type))?.text;
  return { headers: single.headers, text: of('text/plain') ?? '', html: of('text/html') };
}

function parsePart(raw: string): { headers: Record<string, string>; text: string } {
  const split = raw.search(/\r?\n\r?\n/);
  const head = split === -1 ? raw : raw.slice(0, split);
  let body = split === -1 ? '' : raw.slice(split).replace(/^\r?\n\r?\n/, '');
  const headers: Record<string, string> = {};
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const encoding = (headers['content-transfer-encoding'] ?? '7bit').toLowerCase();
  if (encoding === 'quoted-printable') body = decodeQuotedPrintable(body);
  else if (encoding === 'base64') body = Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  return { headers, text: body.replace(/\r\n/g, '\n') };
}

/** A real SMTP server on loopback (no TLS, no auth) that keeps every message it receives. */
export async function startSmtpServer(): Promise<TestSmtpServer> {
  const messages: ReceivedMail[] = [];
  const listeners = new Set<(mail: ReceivedMail) => void>();

  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    closeTimeout: 2_000,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (err) => callback(err));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const { headers, text, html } = parseMail(raw);
        const mail: ReceivedMail = {
          seq: messages.length,
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          raw,
          headers,
          subject: decodeWords(headers.subject ?? ''),
          text,
          ...(html === undefined ? {} : { html }),
        };
        messages.push(mail);
        for (const listener of [...listeners]) listener(mail);
        callback();
      });
    },
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  // Errors after start (a client dropping the connection) must not crash the test process.
  server.on('error', () => undefined);
  const port = (server.server.address() as AddressInfo).port;

  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    messages,
    waitFor(predicate, timeoutMs = 10_000) {
      const found = messages.find(predicate);
      if (found) return Promise.resolve(found);
      return new Promise<ReceivedMail>((resolve, reject) => {
        const listener = (mail: ReceivedMail) => {
          if (!predicate(mail)) return;
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(mail);
        };
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(new Error(`no matching mail within ${timeoutMs} ms (${messages.length} received)`));
        }, timeoutMs);
        listeners.add(listener);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * The lines of a mail body that hold a single secret on their own: one word, no spaces, at least
 * 12 characters (a temporary password or a reset token).
 */
export function secretLines(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => /^\S{12,}$/.test(line));
}
