import type { OutgoingHttpHeaders } from 'node:http';
import { PassThrough, Readable } from 'node:stream';
import type { CaptureSink } from './capture-types.js';

/**
 * Captures a payload handed over in one piece (Fastify's `onSend`): a string, a Buffer, nothing,
 * or a Node stream, which is read here and copied into a pass-through that is sent in its place.
 * When the client leaves, the framework destroys that pass-through but the stream is still read
 * to its end for the capture. Anything else (a web `ReadableStream`, a `Response`) is sent as it
 * is and not shared.
 */
export function capturePayload(capture: CaptureSink, status: number, headers: OutgoingHttpHeaders, payload: unknown): unknown {
  if (payload === null || payload === undefined) {
    capture.complete(status, headers);
    return payload;
  }
  if (typeof payload === 'string' || payload instanceof Uint8Array) {
    capture.push(payload);
    capture.complete(status, headers);
    return payload;
  }
  if (payload instanceof Readable) return teeStream(capture, status, headers, payload);
  capture.share(null);
  return payload;
}

function teeStream(capture: CaptureSink, status: number, headers: OutgoingHttpHeaders, source: Readable): PassThrough {
  const out = new PassThrough();
  let outOpen = true;
  source.on('data', (chunk: unknown) => {
    capture.push(chunk);
    if (outOpen && !out.write(chunk)) source.pause();
  });
  out.on('drain', () => source.resume());
  // Destroyed by the framework when the client leaves: keep reading, for the capture.
  out.once('close', () => {
    outOpen = false;
    source.resume();
  });
  source.once('end', () => {
    capture.complete(status, headers);
    if (outOpen) out.end();
  });
  source.once('error', (error) => {
    capture.broken();
    if (outOpen) out.destroy(error);
  });
  source.once('close', () => {
    if (source.readableEnded) return;
    capture.broken();
    if (outOpen) out.destroy(new Error('the response stream closed before its end'));
  });
  return out;
}
