import createDOMPurify, { type DOMPurify } from 'dompurify';
import { JSDOM } from 'jsdom';
import { HttpProblem, problems } from '../../kernel/plugin-api.ts';

export const LOGO_TYPES = ['image/png', 'image/jpeg', 'image/svg+xml'] as const;
export type LogoType = (typeof LOGO_TYPES)[number];

/** The largest logo accepted, in bytes. */
export const LOGO_LIMIT_BYTES = 512 * 1024;

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const JPEG_SIGNATURE = Buffer.from([0xff, 0xd8, 0xff]);
const SVG_NAMESPACE = 'http://www.w3.org/2000/svg';

/**
 * A logo as sent, checked by its content (never by the name or type it came with): a PNG or JPEG by
 * its signature, an SVG as well-formed XML with an `svg` root, sanitized. A type that was declared
 * and differs from the content's is refused (a disguised file), as is anything else (415).
 */
export function acceptLogo(data: Buffer, declared: string | undefined): { type: LogoType; data: Buffer; sanitized: boolean } {
  if (data.length === 0) throw problems.badRequest('the logo is empty: send the image as the request body', [{ path: 'body', message: 'empty' }]);
  const type = typeOf(data);
  if (!type) throw new HttpProblem(415, 'the logo is not a PNG, JPEG or SVG image (its content was checked, not its name or type)', { errors: [{ path: 'body', message: 'not a PNG, JPEG or SVG image' }] });
  if (declared && declared !== 'application/octet-stream' && declared !== type) {
    throw new HttpProblem(415, `the logo was sent as ${declared} but its content is ${type}`, { errors: [{ path: 'body', message: `content is ${type}, not ${declared}` }] });
  }
  if (type !== 'image/svg+xml') return { type, data, sanitized: false };
  const text = data.toString('utf8');
  const clean = sanitizeSvg(text);
  return { type, data: Buffer.from(clean, 'utf8'), sanitized: clean !== text };
}

function typeOf(data: Buffer): LogoType | undefined {
  if (data.subarray(0, PNG_SIGNATURE.length).equals(PNG_SIGNATURE)) return 'image/png';
  if (data.subarray(0, JPEG_SIGNATURE.length).equals(JPEG_SIGNATURE)) return 'image/jpeg';
  // An SVG is text whose first element (after a declaration, comments, space) is `svg`; its first 4 KB
  // tell, and the whole of it is parsed when it is sanitized.
  const start = data.subarray(0, 4096).toString('utf8').replace(/^\uFEFF/, '');
  const firstTag = /<(?![?!])([A-Za-z][\w:.-]*)/.exec(start);
  if (firstTag && /^(svg|[\w.-]+:svg)$/i.test(firstTag[1])) return 'image/svg+xml';
  return undefined;
}

let purifier: { purify: DOMPurify; window: JSDOM['window'] } | undefined;

/** DOMPurify on a jsdom window of its own, made on the first SVG; hooks keep what an SVG references inside itself. */
function svgPurifier() {
  if (purifier) return purifier;
  const { window } = new JSDOM('');
  const purify = createDOMPurify(window as never);
  purify.addHook('uponSanitizeAttribute', (_node, data) => {
    const name = data.attrName.toLowerCase();
    // Only references inside the image (#id): a logo that loads another host's resource leaks who views it.
    if ((name === 'href' || name === 'xlink:href') && !data.attrValue.trim().startsWith('#')) data.keepAttr = false;
    if (/url\s*\(\s*['"]?(?!#)|@import|expression\s*\(/i.test(data.attrValue)) data.keepAttr = false;
  });
  purifier = { purify, window };
  return purifier;
}

/**
 * The SVG with only what draws: no script, event handler, foreign object, style sheet, link, `use`
 * (not in DOMPurify's SVG profile), external reference or entity. DOMPurify's SVG profile sanitizes
 * the parsed document in place; a DOCTYPE (entities) or text that is not well-formed XML is refused
 * rather than repaired.
 */
export function sanitizeSvg(text: string): string {
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw invalidSvg('an SVG with a DOCTYPE or entity declarations is not accepted');
  const { purify, window } = svgPurifier();
  const document = new window.DOMParser().parseFromString(text, 'image/svg+xml');
  const root = document.documentElement;
  if (!root || root.getElementsByTagName('parsererror').length > 0 || root.localName === 'parsererror') throw invalidSvg('the SVG is not well-formed XML');
  if (root.localName !== 'svg' || root.namespaceURI !== SVG_NAMESPACE) throw invalidSvg(`the root element must be <svg> in the SVG namespace (${SVG_NAMESPACE})`);
  purify.sanitize(root, { IN_PLACE: true, USE_PROFILES: { svg: true, svgFilters: true }, FORBID_TAGS: ['style', 'image', 'foreignObject', 'a'] });
  return new window.XMLSerializer().serializeToString(root);
}

const invalidSvg = (detail: string) => problems.badRequest(detail, [{ path: 'body', message: detail }]);
