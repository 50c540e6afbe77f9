import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { expectProblem } from '../harness/answers.ts';

/** A 1×1 PNG and a minimal JPEG: real images, recognized by their signatures. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
const JPEG = Buffer.from('/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP//////////////////////////////////////////////////////////////////////////////////////wgALCAABAAEBAREA/8QAFBABAAAAAAAAAAAAAAAAAAAAAP/aAAgBAQABPxA=', 'base64');
const SVG_NS = 'http://www.w3.org/2000/svg';
const sha256 = (data: Buffer) => crypto.createHash('sha256').update(data).digest('hex');

/** Issue 18, "Branding": per organization, through HTTP on both adapters. */
describe.each(DIALECTS)('branding (%s)', (dialect) => {
  let t: TestKernel;
  let viewer: { token: string };
  let other: { orgId: number; token: string };
  const putLogo = (body: string | Buffer, type: string, token?: string) => t.request('PUT', '/api/branding/logo', { body, headers: { 'content-type': type }, ...(token ? { token } : {}) });

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    viewer = await t.userToken('viewer');
    other = await t.outsider('branding-outsider');
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('answers the defaults until set; a PUT replaces every setting, colours in lower case, and a setting left out goes back to its default', async () => {
    const fresh = await t.request('GET', '/api/branding', { token: other.token });
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.body).toEqual({ display_name: null, primary_color: '#1f4e79', accent_color: '#f28c28', email_footer: null, logo: null, updated_at: null });

    const put = await t.request('PUT', '/api/branding', { body: { display_name: 'Acme Data', primary_color: '#AABBCC', accent_color: '#0f0', email_footer: 'Acme Inc. · 1 Main St <b>not bold</b>' } });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ display_name: 'Acme Data', primary_color: '#aabbcc', accent_color: '#0f0', email_footer: 'Acme Inc. · 1 Main St <b>not bold</b>', logo: null });
    expect((await t.request('GET', '/api/branding', { token: viewer.token })).body).toEqual(put.body);

    const replaced = await t.request('PUT', '/api/branding', { body: { display_name: 'Acme' } });
    expect(replaced.body).toMatchObject({ display_name: 'Acme', primary_color: '#1f4e79', accent_color: '#f28c28', email_footer: null });
    // Another organization's branding is its own.
    expect((await t.request('GET', '/api/branding', { token: other.token })).body.display_name).toBeNull();
  });

  it('refuses bad colours, unknown and oversized fields with a 400 naming the field, and changes nothing', async () => {
    await t.request('PUT', '/api/branding', { body: { display_name: 'Kept', primary_color: '#123456' } });
    for (const [field, value] of [
      ['primary_color', 'red'],
      ['primary_color', '#12'],
      ['accent_color', '#GGGGGG'],
      ['accent_color', '#fff;background:url(https://evil.example/x)'],
      ['primary_color', "#fff' onload='x"],
      ['display_name', 'x'.repeat(101)],
      ['display_name', '   '],
      ['email_footer', 'y'.repeat(2001)],
      ['primary_color', 42],
    ] as const) {
      expectProblem(await t.request('PUT', '/api/branding', { body: { [field]: value } }), 400, `body.${field}`);
    }
    expectProblem(await t.request('PUT', '/api/branding', { body: { display_name: 'x', logo_url: 'https://evil.example/logo.png' } }), 400);
    expectProblem(await t.request('PUT', '/api/branding', { body: { display_name: 'nul\u0000name' } }), 400, 'body.display_name');
    const kept = await t.request('GET', '/api/branding');
    expect(kept.body).toMatchObject({ display_name: 'Kept', primary_color: '#123456' });
  });

  it('lets every member read the branding and only holders of branding.write change it', async () => {
    expect((await t.request('GET', '/api/branding', { token: viewer.token })).status).toBe(200);
    expectProblem(await t.request('PUT', '/api/branding', { token: viewer.token, body: { display_name: 'Hijacked' } }), 403);
    expectProblem(await putLogo(PNG, 'image/png', viewer.token), 403);
    expectProblem(await t.request('DELETE', '/api/branding/logo', { token: viewer.token }), 403);
    expectProblem(await t.request('GET', '/api/branding', { token: null }), 401);
  });

  it('stores a PNG and a JPEG byte for byte and serves each with its type', async () => {
    const png = await putLogo(PNG, 'image/png');
    expect(png.status, png.text).toBe(200);
    expect(png.body.logo).toMatchObject({ content_type: 'image/png', bytes: PNG.length, sha256: sha256(PNG) });
    expect(png.body.sanitized).toBe(false);
    const served = await fetch(`${t.url}/api/branding/logo`, { headers: { authorization: `Bearer ${t.adminToken}` } });
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('image/png');
    expect(served.headers.get('x-content-type-options')).toBe('nosniff');
    expect(Buffer.from(await served.arrayBuffer()).equals(PNG)).toBe(true);

    // Sent without a type of its own (application/octet-stream): the content says what it is.
    const jpeg = await putLogo(JPEG, 'application/octet-stream');
    expect(jpeg.status, jpeg.text).toBe(200);
    expect(jpeg.body.logo).toMatchObject({ content_type: 'image/jpeg', bytes: JPEG.length });
    const again = await fetch(`${t.url}/api/branding/logo`, { headers: { authorization: `Bearer ${t.adminToken}` } });
    expect(again.headers.get('content-type')).toBe('image/jpeg');
    expect(Buffer.from(await again.arrayBuffer()).equals(JPEG)).toBe(true);
    // The settings stay as they were.
    expect((await t.request('GET', '/api/branding')).body.display_name).toBe('Kept');
  });

  it('sanitizes an SVG: no script, handler, foreign object, style sheet or reference outside the image is kept', async () => {
    const hostile = `<?xml version="1.0"?>
<svg xmlns="${SVG_NS}" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 100 100" onload="alert(1)">
  <script>alert('svg')</script>
  <style>@import url(https://evil.example/track.css);</style>
  <defs><linearGradient id="g"><stop offset="0" stop-color="#1f4e79"/></linearGradient></defs>
  <foreignObject width="10" height="10"><div xmlns="http://www.w3.org/1999/xhtml">html</div></foreignObject>
  <a href="javascript:alert(2)"><circle r="5"/></a>
  <image href="https://evil.example/pixel.png" width="1" height="1"/>
  <use xlink:href="https://evil.example/sprite.svg#icon"/>
  <use href="#shape"/>
  <rect id="shape" width="100" height="100" fill="url(#g)" style="fill: url(https://evil.example/x)" onclick="steal()"/>
  <text x="10" y="50">Acme</text>
</svg>`;
    const res = await putLogo(hostile, 'image/svg+xml');
    expect(res.status, res.text).toBe(200);
    expect(res.body.sanitized).toBe(true);
    expect(res.body.logo.content_type).toBe('image/svg+xml');
    const served = await fetch(`${t.url}/api/branding/logo`, { headers: { authorization: `Bearer ${t.adminToken}` } });
    expect(served.headers.get('content-type')).toBe('image/svg+xml');
    expect(served.headers.get('content-security-policy')).toContain("default-src 'none'");
    const text = await served.text();
    expect(text).toMatch(/^<svg[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    for (const gone of ['<script', 'alert', 'onload', 'onclick', '<style', '@import', 'foreignObject', 'javascript:', 'evil.example', '<image']) expect(text).not.toContain(gone);
    // What draws stays: the shapes, the text, the gradient and the paint referring to it inside the
    // image (DOMPurify's SVG profile has no <use>, whatever it refers to).
    for (const kept of ['<rect', 'id="shape"', 'fill="url(#g)"', '<text', 'Acme', 'linearGradient']) expect(text).toContain(kept);
    expect(text).not.toContain('<use');
    expect(res.body.logo.sha256).toBe(sha256(Buffer.from(text)));
  });

  it('keeps a clean SVG as sent', async () => {
    const clean = `<svg xmlns="${SVG_NS}" viewBox="0 0 10 10"><circle cx="5" cy="5" r="4" fill="#f28c28"/></svg>`;
    const res = await putLogo(clean, 'image/svg+xml');
    expect(res.status, res.text).toBe(200);
    expect(res.body.sanitized).toBe(false);
    expect(res.body.logo.bytes).toBe(Buffer.byteLength(clean));
  });

  it('refuses disguised, foreign, empty, oversized and malformed files with a 4xx naming the problem, keeping the logo it had', async () => {
    const before = (await t.request('GET', '/api/branding')).body.logo;
    expect(before).not.toBeNull();
    // Declared one type, made of another.
    const html = await putLogo('<html><body><script>alert(1)</script></body></html>', 'image/png');
    expectProblem(html, 415, 'body');
    expect(html.body.detail).toMatch(/not a PNG, JPEG or SVG/);
    const disguisedPng = await putLogo(PNG, 'image/svg+xml');
    expectProblem(disguisedPng, 415, 'body');
    expect(disguisedPng.body.detail).toBe('the logo was sent as image/svg+xml but its content is image/png');
    expectProblem(await putLogo(Buffer.from('GIF89a\u0001\u0000\u0001\u0000'), 'application/octet-stream'), 415);
    expectProblem(await putLogo('%PDF-1.7 not an image', 'image/jpeg'), 415);
    // A type the route does not take at all.
    expectProblem(await putLogo('<svg/>', 'text/html'), 415);
    expectProblem(await putLogo('', 'image/png'), 400, 'body');
    const big = Buffer.concat([PNG, Buffer.alloc(512 * 1024)]);
    const tooBig = await putLogo(big, 'image/png');
    expectProblem(tooBig, 413, 'body');
    expect(tooBig.body.detail).toMatch(/larger than 512 KB/);
    // SVGs: not well-formed, entities (billion laughs), a root that is not svg, or svg outside its namespace.
    expectProblem(await putLogo(`<svg xmlns="${SVG_NS}"><rect></svg>`, 'image/svg+xml'), 400, 'body');
    const laughs = `<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><svg xmlns="${SVG_NS}"><text>&b;</text></svg>`;
    const entities = await putLogo(laughs, 'image/svg+xml');
    expectProblem(entities, 400, 'body');
    expect(entities.body.detail).toMatch(/DOCTYPE/);
    expectProblem(await putLogo('<svg><rect/></svg>', 'image/svg+xml'), 400, 'body');
    expectProblem(await putLogo(`<html xmlns="http://www.w3.org/1999/xhtml"><svg xmlns="${SVG_NS}"/></html>`, 'image/svg+xml'), 415);
    expectProblem(await putLogo(Buffer.from([0xef, 0xbb, 0xbf, 0xff, 0xfe, 0x3c, 0x73]), 'image/svg+xml'), 415);
    // Many unclosed comments before the root: answered at once, not after a regular expression backtracks.
    expectProblem(await putLogo(`${'<!--'.repeat(100_000)}<svg xmlns="${SVG_NS}"/>`, 'image/svg+xml'), 415);
    expect((await t.request('GET', '/api/branding')).body.logo).toEqual(before);
  });

  it('removes the logo; then there is none to serve or remove', async () => {
    expect((await t.request('DELETE', '/api/branding/logo')).status).toBe(204);
    expect((await t.request('GET', '/api/branding')).body.logo).toBeNull();
    expectProblem(await t.request('GET', '/api/branding/logo'), 404);
    expectProblem(await t.request('DELETE', '/api/branding/logo'), 404);
  });

  it('audits each change without the logo itself', async () => {
    const audit = await t.request('GET', '/api/audit?action=branding.*');
    expect(audit.status, audit.text).toBe(200);
    const actions = audit.body.items.map((e: { action: string }) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['branding.update', 'branding.logo.update', 'branding.logo.delete']));
    expect(audit.text).not.toContain('<svg');
    expect(audit.body.items.find((e: { action: string }) => e.action === 'branding.logo.update').details).toMatchObject({ content_type: expect.any(String), bytes: expect.any(Number) });
  });
});
