import { JSDOM } from 'jsdom';
import mammoth from 'mammoth';
import { extractText } from 'unpdf';
import { HttpProblem, problems } from '../../kernel/plugin-api.ts';

/** The kinds of document read, by the media type answered. */
export const DOCUMENT_TYPES = {
  'text/plain': ['.txt', '.text'],
  'text/markdown': ['.md', '.markdown'],
  'text/html': ['.html', '.htm'],
  'text/csv': ['.csv'],
  'application/pdf': ['.pdf'],
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': ['.docx'],
} as const;
export type DocumentType = keyof typeof DOCUMENT_TYPES;

const TEXT_TYPES = new Set<DocumentType>(['text/plain', 'text/markdown', 'text/html', 'text/csv']);
const PDF_MAGIC = Buffer.from('%PDF-');
const ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
const startsWith = (file: Buffer, magic: Buffer) => file.subarray(0, magic.length).equals(magic);

const unsupported = (what: string) =>
  new HttpProblem(415, `${what}: send text, Markdown, HTML, CSV, PDF or DOCX (${Object.values(DOCUMENT_TYPES).flat().join(', ')})`);

/** The type the client claims: its media type when it names one we read, else the file name's extension. */
function claimedType(filename: string, mimeType: string): DocumentType | null {
  const declared = mimeType.split(';')[0].trim().toLowerCase();
  if (declared in DOCUMENT_TYPES) return declared as DocumentType;
  const lower = filename.toLowerCase();
  for (const [type, extensions] of Object.entries(DOCUMENT_TYPES)) if (extensions.some((e) => lower.endsWith(e))) return type as DocumentType;
  return null;
}

/** Text that is what it claims: UTF-8 (a BOM dropped), no NUL byte, no binary file's signature. */
function decodeText(file: Buffer): string {
  if (startsWith(file, PDF_MAGIC) || startsWith(file, ZIP_MAGIC) || file.includes(0)) throw new HttpProblem(415, 'the file claims to be text but its bytes are binary (a disguised file)');
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(file);
  } catch {
    throw new HttpProblem(415, 'the file claims to be text but is not valid UTF-8');
  }
}

/** The visible text of an HTML page: no script, style or template, block elements on lines of their own. */
function htmlText(html: string): string {
  const { document } = new JSDOM(html).window;
  for (const element of document.querySelectorAll('script, style, template, noscript, head')) element.remove();
  for (const element of document.querySelectorAll('p, div, br, li, h1, h2, h3, h4, h5, h6, tr, section, article')) element.append('\n');
  return (document.body?.textContent ?? '').replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n');
}

/**
 * A document's type, checked against its bytes, and its text: a PDF through unpdf (PDF.js), a DOCX
 * through mammoth, HTML through jsdom; text kinds as they are. An empty file is a 400, a file that
 * is not what it claims a 415, one that cannot be read (or holds no text) a 422.
 */
export async function extractDocument(file: Buffer, filename: string, mimeType: string): Promise<{ type: DocumentType; text: string }> {
  if (file.length === 0) throw problems.badRequest('the file is empty', [{ path: 'body.file', message: 'empty' }]);
  const type = claimedType(filename, mimeType);
  if (!type) throw unsupported(`cannot read "${mimeType || 'an unnamed type'}"`);
  let text: string;
  if (type === 'application/pdf') {
    if (!startsWith(file, PDF_MAGIC)) throw new HttpProblem(415, 'the file claims to be a PDF but does not start as one (a disguised file)');
    try {
      text = (await extractText(new Uint8Array(file), { mergePages: true })).text;
    } catch (err) {
      throw problems.unprocessable(`the PDF cannot be read: ${String((err as Error).message).slice(0, 200)}`);
    }
  } else if (!TEXT_TYPES.has(type)) {
    if (!startsWith(file, ZIP_MAGIC)) throw new HttpProblem(415, 'the file claims to be a DOCX but is not a ZIP package (a disguised file)');
    try {
      text = (await mammoth.extractRawText({ buffer: file })).value;
    } catch (err) {
      throw problems.unprocessable(`the DOCX cannot be read: ${String((err as Error).message).slice(0, 200)}`);
    }
  } else {
    const decoded = decodeText(file);
    text = type === 'text/html' ? htmlText(decoded) : decoded;
  }
  text = text.replace(/\r\n?/g, '\n').replace(/\u0000/g, '').trim();
  if (!text) throw problems.unprocessable('no text could be read from the file');
  return { type, text };
}
