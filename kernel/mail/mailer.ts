import nodemailer, { type Transporter } from 'nodemailer';
import type { Logger } from 'pino';
import type { Storage } from '../../storage/index.ts';

export interface MailMessage {
  to: string;
  subject: string;
  /** Plain text; secrets (temporary passwords, reset tokens) stand on a line of their own. */
  text: string;
  /** The same message as HTML (a branded e-mail), sent beside the text as its alternative. */
  html?: string;
}

/**
 * Sends mail over SMTP when `SMTP_URL` is set. Without it (development) each mail is kept in the
 * `mail_outbox` table and only its recipient and subject are logged: the body may hold a secret.
 */
export class Mailer {
  private readonly transport: Transporter | null;

  constructor(
    private readonly storage: Storage,
    private readonly logger: Logger,
    private readonly from: string,
    smtpUrl: string | undefined,
  ) {
    this.transport = smtpUrl ? nodemailer.createTransport(smtpUrl) : null;
  }

  async send(message: MailMessage): Promise<void> {
    if (this.transport) {
      await this.transport.sendMail({ from: this.from, to: message.to, subject: message.subject, text: message.text, ...(message.html ? { html: message.html } : {}) });
      this.logger.info({ to: message.to, subject: message.subject }, 'mail sent');
      return;
    }
    const row = await this.storage.db
      .insertInto('mail_outbox')
      .values({ recipient: message.to, subject: message.subject, body: message.text, created_at: this.storage.now() })
      .returning('id')
      .executeTakeFirstOrThrow();
    this.logger.info({ to: message.to, subject: message.subject, outbox_id: row.id }, 'mail kept in the outbox (SMTP_URL is not set)');
  }

  close() {
    this.transport?.close();
  }
}
