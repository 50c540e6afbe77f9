import { escapeHtml, type MailMessage } from '../../kernel/plugin-api.ts';
import type { ShownBranding } from '../branding/public.ts';
import type { Notification } from './notification-store.ts';

/**
 * A notification as an e-mail in the organization's branding (null: none): its display name in the subject and
 * the header (its primary colour behind it), its footer at the end. Plain text and the same as
 * HTML; every text is escaped (colours are hex by the branding's own check). `baseUrl` makes the
 * link absolute when the platform knows its public address.
 */
export function notificationMail(to: string, notification: Notification, branding: ShownBranding | null, baseUrl: string | undefined): MailMessage {
  // A user of no organization gets the platform's name, and the message without colours.
  const brandName = branding?.shown_name || 'Data Platform';
  const link = notification.link ? `${baseUrl ?? ''}${notification.link}` : null;
  const footer = branding?.email_footer ?? brandName;
  const [primary, accent] = branding ? [branding.primary_color, branding.accent_color] : ['#333333', '#333333'];
  const text = [notification.title, '', notification.body, ...(link ? ['', link] : []), '', '-- ', footer, '', 'Choose what you are told, and how: /api/notifications/preferences'].join('\n');
  const html = `<!doctype html><html><body style="margin:0;font-family:Arial,sans-serif;color:#1d2433">
<div style="background:${primary};color:#ffffff;padding:12px 20px;font-weight:bold">${escapeHtml(brandName)}</div>
<div style="padding:20px"><h2 style="margin:0 0 12px;font-size:18px">${escapeHtml(notification.title)}</h2>
<p style="margin:0 0 12px">${escapeHtml(notification.body)}</p>${link ? `<p><a style="color:${accent}" href="${escapeHtml(link)}">${escapeHtml(link)}</a></p>` : ''}</div>
<div style="border-top:1px solid #dfe3ea;padding:12px 20px;color:#5b6578;font-size:12px;white-space:pre-line">${escapeHtml(footer)}</div>
</body></html>`;
  return { to, subject: `[${brandName}] ${notification.title}`, text, html };
}
