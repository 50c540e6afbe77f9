import createDOMPurify, { type DOMPurify } from 'dompurify';
import { JSDOM } from 'jsdom';
import { marked } from 'marked';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { cardType, cardTypes } from '../dashboards/public.ts';

interface TextConfig {
  markdown: string;
}

/** DOMPurify on a jsdom window, made at the first text card (a window costs tens of milliseconds). */
let purifier: DOMPurify | undefined;

/**
 * Markdown (CommonMark and GitHub's tables) as HTML safe to put in a page: marked renders it, and
 * DOMPurify's HTML profile keeps text formatting, links, lists, tables and code only: no script,
 * style, form, frame or image (an image from another host would tell it who reads the dashboard),
 * and links to http(s) and mailto only.
 */
export function markdownHtml(markdown: string): string {
  purifier ??= createDOMPurify(new JSDOM('').window as never);
  const html = marked.parse(markdown, { async: false, gfm: true });
  return purifier.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'img', 'form', 'input', 'button', 'iframe', 'svg', 'math', 'video', 'audio', 'picture', 'source'],
    FORBID_ATTR: ['style', 'class', 'id'],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  });
}

/** `text`: Markdown shown as sanitized HTML. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      cardTypes,
      cardType<TextConfig>({
        type: 'text',
        description: 'Markdown (CommonMark, GitHub tables), answered as sanitized HTML: no script, style, image or form; links to http(s) and mailto only',
        config: {
          type: 'object',
          properties: { markdown: { type: 'string', maxLength: 20_000 } },
          required: ['markdown'],
          additionalProperties: false,
        },
        data: async ({ config }) => ({ data: { markdown: config.markdown, html: markdownHtml(config.markdown) }, table: null }),
      }),
    ),
});
