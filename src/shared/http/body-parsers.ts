import { isUtf8 } from 'buffer';
import * as querystring from 'node:querystring';
import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors/app-error';
import { OAuthError } from '../errors/oauth-error';
import { isOAuthPath } from '../errors/problem';

/** Headers a request may carry once (lower-case name, name as answered). */
const ONCE_HEADERS = [
  ['authorization', 'Authorization'],
  ['content-type', 'Content-Type'],
  ['host', 'Host'],
] as const;

/** The most distinct parameters an OAuth form body may carry (a real request has about ten). */
export const MAX_FORM_PARAMETERS = 100;

/** querystring's percent-decoder to bytes (public, but missing from @types/node). */
const unescapeBuffer = (querystring as unknown as { unescapeBuffer(s: string): Buffer }).unescapeBuffer;

/** Only the OAuth endpoints take form (and text) bodies (RFC 6749); everything else is JSON (spec 2). */
const notJson = () => new AppError('request/unsupported_media_type', 'Request bodies are JSON (application/json)');

/** Deepest object/array nesting a request body may have (public_metadata included). */
export const MAX_BODY_DEPTH = 32;

/**
 * Most property names a JSON body may have, at every depth together: far more than any request
 * schema holds (public_metadata, the largest free-form object, has at most 4096 bytes), few enough
 * that no body costs the validation more than a real one.
 */
export const MAX_BODY_PROPERTIES = 1000;

/**
 * Most array items a JSON body may have, at every depth together: every array public_metadata's
 * 4096 bytes can hold (an item takes 2 bytes at least: `0,`), and far more than the longest list a
 * schema takes (sms_allowed_countries, 300); a 100 KB body of 50,000 items cost the validation
 * half a second.
 */
export const MAX_BODY_ARRAY_ITEMS = 2048;

/**
 * Why a parsed body cannot be processed (up to `max` reasons, default one; none when it can): nesting deeper than
 * MAX_BODY_DEPTH (the DTO transform would recurse without bound), a string (value or key)
 * with U+0000 or a lone surrogate, which PostgreSQL text and jsonb cannot store, or a number
 * beyond the double range (parsed as Infinity, stored as null). Iterative, so
 * the check itself never runs out of stack. With `reservedNames` (JSON bodies, which go through
 * Nest's ValidationPipe), a property named `__proto__`, `constructor` or `prototype` at any depth: the pipe
 * deletes those in place, so one would otherwise be dropped unsaid, even from public_metadata.
 */
export function bodyFaults(body: unknown, opts: { reservedNames?: boolean; max?: number; maxProperties?: number; maxItems?: number } = {}): { field: string; message: string }[] {
  const faults: { field: string; message: string }[] = [];
  const max = opts.max ?? 1;
  let properties = 0;
  let items = 0;
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: body, path: '', depth: 0 }];
  while (stack.length && faults.length < max) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      if (!storable(value)) faults.push({ field: path || 'body', message: `${path || 'body'} contains a character that is not allowed (U+0000 or an unpaired surrogate)` });
      continue;
    }
    // JSON.parse turns a number beyond the double range (1e400) into Infinity, which would be
    // stored as null: refused instead of changed
    if (typeof value === 'number' && !Number.isFinite(value)) faults.push({ field: path || 'body', message: `${path || 'body'} is a number out of range` });
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_BODY_DEPTH) {
      faults.push({ field: path || 'body', message: `the body is nested deeper than ${MAX_BODY_DEPTH} levels` });
      continue;
    }
    // every property and array item costs the DTO transform and validation work: a body of
    // thousands of unknown names or items (within the size limit) would cost far more than any
    // real request, so they are counted before any is looked at
    if (Array.isArray(value)) {
      items += value.length;
      if (opts.maxItems !== undefined && items > opts.maxItems) return [{ field: 'body', message: `the body has more than ${opts.maxItems} array items` }];
      for (let i = 0; i < value.length; i++) stack.push({ value: value[i], path: path ? `${path}.${i}` : String(i), depth: depth + 1 });
      continue;
    }
    const entries = Object.entries(value);
    properties += entries.length;
    if (opts.maxProperties !== undefined && properties > opts.maxProperties) {
      return [{ field: 'body', message: `the body has more than ${opts.maxProperties} properties` }];
    }
    let badName = false;
    for (const [k, v] of entries) {
      if (faults.length >= max) break;
      const p = path ? `${path}.${k}` : k;
      if (!storable(k)) {
        // one entry for the object, however many of its names are bad (a name cannot be echoed)
        if (!badName) faults.push({ field: path || 'body', message: `a property name contains a character that is not allowed (U+0000 or an unpaired surrogate)` });
        badName = true;
        continue;
      }
      if (opts.reservedNames && (k === 'constructor' || k === 'prototype' || k === '__proto__')) {
        faults.push({ field: p, message: `property ${p} is not allowed (__proto__, constructor and prototype are reserved names)` });
        continue;
      }
      stack.push({ value: v, path: p, depth: depth + 1 });
    }
  }
  return faults;
}

/** The first of bodyFaults. */
export function bodyFault(body: unknown, opts: { reservedNames?: boolean } = {}): { field: string; message: string } | undefined {
  return bodyFaults(body, opts)[0];
}

/** U+0000, or a surrogate code unit without its pair (with the u flag a paired one is one astral code point). */
// eslint-disable-next-line no-control-regex -- U+0000 is exactly what is looked for
const UNSTORABLE = /[\u0000\p{Cs}]/u;

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function storable(s: string): boolean {
  return !UNSTORABLE.test(s);
}

/**
 * The request body parsers (instead of Nest's defaults): JSON everywhere, checked by bodyFault
 * (400 request/invalid); form bodies only on /oauth/* (elsewhere 415, so a cross-site HTML form
 * can never drive a JSON endpoint such as the dashboard login). The query string gets the same
 * bodyFault check (an onRequest hook), so one rule holds for every input.
 */
export function installBodyParsers(fastify: FastifyInstance, bodyLimit: number): void {
  const json = fastify.getDefaultJsonParser('error', 'error');
  // a text body: 415 like any other non-JSON type, except on /oauth/* where the form reader
  // answers it in the OAuth envelope (400 invalid_request, RFC 6749 section 5.2)
  fastify.removeContentTypeParser('text/plain');
  fastify.addContentTypeParser('text/plain', { parseAs: 'string', bodyLimit }, (req, body, done) => {
    if (!isOAuthPath(req.url)) return done(notJson(), undefined);
    done(null, body);
  });
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (req, body, done) => {
    // JSON is UTF-8 (RFC 8259 section 8.1): another declared charset is another media type, and
    // bytes that are not UTF-8 are refused, never read with U+FFFD in their place (two different
    // passwords would become one)
    const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(req.headers['content-type'] ?? '')?.[1];
    if (charset !== undefined && !/^utf-?8$/i.test(charset)) return done(new AppError('request/unsupported_media_type', 'JSON bodies are UTF-8 (charset=utf-8, or none)'), undefined);
    const bytes = body as Buffer;
    if (!isUtf8(bytes)) return done(new AppError('request/malformed_json', 'The body is not valid UTF-8'), undefined);
    const text = bytes.toString('utf8');
    // Content-Type: application/json with nothing after it (what many HTTP clients send for a POST
    // without content): no body. An endpoint without one accepts it; one with a body answers
    // its missing fields (400 request/invalid)
    if (text.trim() === '') return done(null, undefined);
    json(req, text, (err: Error | null, value?: unknown) => {
      // valid JSON refused by the parser: a __proto__ or constructor.prototype property (prototype poisoning)
      if (err && isJson(text)) return done(new AppError('request/invalid', 'One or more fields are invalid', { errors: [{ field: 'body', message: 'properties named __proto__ or constructor.prototype are not allowed' }] }), undefined);
      if (err) return done(err, undefined);
      // every request schema is an object: null, an array or a bare value is not "no body"
      if (value === null || typeof value !== 'object' || Array.isArray(value))
        return done(new AppError('request/invalid', 'One or more fields are invalid', { errors: [{ field: 'body', message: 'the body must be a JSON object' }] }), undefined);
      // every fault of this kind at once (at most 20), one errors[] entry each
      const faults = bodyFaults(value, { reservedNames: true, max: 20, maxProperties: MAX_BODY_PROPERTIES, maxItems: MAX_BODY_ARRAY_ITEMS });
      if (faults.length) return done(new AppError('request/invalid', 'One or more fields are invalid', { errors: faults }), undefined);
      done(null, value);
    });
  });
  fastify.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer', bodyLimit }, (req, body, done) => {
    if (!isOAuthPath(req.url)) return done(notJson(), undefined);
    // a form is UTF-8 (the WHATWG urlencoded parser's only encoding): another declared charset,
    // raw bytes or percent-encoded bytes that are not UTF-8 are refused, never read with U+FFFD in
    // their place (two different secrets would become one), as JSON bodies are
    const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(req.headers['content-type'] ?? '')?.[1];
    if (charset !== undefined && !/^utf-?8$/i.test(charset)) return done(new OAuthError('invalid_request', 'Form bodies are UTF-8 (charset=utf-8, or none)'), undefined);
    const bytes = body as Buffer;
    if (!isUtf8(bytes)) return done(new OAuthError('invalid_request', 'The form is not valid UTF-8'), undefined);
    let notUtf8 = false;
    const decode = (s: string): string => {
      try {
        return decodeURIComponent(s);
      } catch {
        // a lone `%` is kept as it is (as every form parser does); percent-encoded bytes that are
        // not UTF-8 are refused. Raw non-ASCII characters are percent-encoded first: the byte
        // decoder would otherwise cut each to one byte (`Ł%` read as `A%`)
        const decoded = unescapeBuffer(s.replace(/[\u0080-\u{10ffff}]+/gu, (c) => encodeURIComponent(c)));
        if (!isUtf8(decoded)) notUtf8 = true;
        return decoded.toString('utf8');
      }
    };
    // every parameter (querystring stops at 1,000 by default and drops the rest unsaid); more
    // than any OAuth request has is refused
    const value = querystring.parse(bytes.toString('utf8'), undefined, undefined, { maxKeys: 0, decodeURIComponent: decode });
    if (notUtf8) return done(new OAuthError('invalid_request', 'The form is not valid UTF-8'), undefined);
    if (Object.keys(value).length > MAX_FORM_PARAMETERS) return done(new OAuthError('invalid_request', `At most ${MAX_FORM_PARAMETERS} parameters are accepted`), undefined);
    if (bodyFault(value)) return done(new OAuthError('invalid_request', 'A parameter contains a character that is not allowed'), undefined);
    done(null, value);
  });
  // the query string gets the same check as a body (a %00 would otherwise reach PostgreSQL; a
  // __proto__, constructor or prototype parameter would be deleted unsaid by the validation pipe)
  fastify.addHook('onRequest', (req, _reply, done) => {
    // a compressed body would be read as if it were plain (RFC 9110 section 8.4.1: 415); only a
    // request that carries a body is asked
    const coding = req.headers['content-encoding'];
    const transfer = req.headers['transfer-encoding'];
    const hasBody = transfer !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (hasBody && coding !== undefined && !/^\s*(identity\s*(,\s*identity\s*)*)?$/i.test(coding)) {
      return done(new AppError('request/unsupported_media_type', 'Request bodies are not compressed: Content-Encoding is not supported'));
    }
    // a transfer coding before chunked would be read as if it were plain (RFC 9112 section 6.1).
    // One whose last coding is not chunked the HTTP parser refuses itself (400, one answer): not
    // answered here too, or the socket would carry two answers to one request
    if (transfer !== undefined && /,\s*chunked\s*$/i.test(transfer)) {
      return done(new AppError('request/unsupported_media_type', 'Transfer-Encoding other than chunked is not supported'));
    }
    // one set of credentials per request: with two Authorization headers, this service would read
    // the first and a proxy or log the last (RFC 9110 section 5.3: it is not a list header)
    // the same for the body's media type: two Content-Type headers would be read as the first here
    // and perhaps as the last by a proxy or firewall that inspected the body; and a request naming
    // two hosts is refused as RFC 9112 section 3.2 requires (Node's own check is off: requireHostHeader)
    for (const [name, label] of ONCE_HEADERS) {
      if ((req.raw.headersDistinct?.[name]?.length ?? 0) > 1) {
        return done(isOAuthPath(req.url) ? new OAuthError('invalid_request', `${label} must be sent once`) : new AppError('request/invalid', `${label} must be sent once`));
      }
    }
    // percent-encoded bytes that are not UTF-8 are refused, never read with U+FFFD in their place
    // (as bodies and paths are)
    const q = req.url.indexOf('?');
    if (q >= 0 && req.url.includes('%', q) && !isUtf8(unescapeBuffer(req.url.slice(q + 1).replace(/[\u0080-\u{10ffff}]+/gu, (c) => encodeURIComponent(c))))) {
      return done(isOAuthPath(req.url) ? new OAuthError('invalid_request', 'The query string is not valid UTF-8') : new AppError('request/invalid', 'The query string is not valid UTF-8'));
    }
    const fault = req.query && typeof req.query === 'object' ? bodyFault(req.query, { reservedNames: !isOAuthPath(req.url) }) : undefined;
    if (!fault) return done();
    if (isOAuthPath(req.url)) return done(new OAuthError('invalid_request', 'A parameter contains a character that is not allowed'));
    done(new AppError('request/invalid', 'One or more fields are invalid', { errors: [{ field: fault.field, message: fault.message.replace(/^body /, 'the query ') }] }));
  });
}
