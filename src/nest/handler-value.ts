/** What the Nest interceptor reads of a handler's value and of the response it produced; the rules themselves are the pipeline's (`http/flow/value-answer.ts`). */
import type { OutgoingHttpHeaders } from 'node:http';
import { StreamableFile } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import { firstValueFrom, type Observable } from 'rxjs';
import type { CacheDecision } from '../core/cache.js';
import { takeOwnFields, valueDecision, type OwnFields, type ValueRoute } from '../http/flow/value-answer.js';

/**
 * An error thrown by the handler, wrapped on its way through the cache so it can be told
 * apart from the cache's own errors; the original is rethrown to Nest, which sends it to the
 * client as it would without the cache.
 */
export class HandlerError extends Error {
  constructor(readonly error: unknown) {
    super(error instanceof Error ? error.message : String(error), { cause: error });
    this.name = error instanceof Error ? error.name : 'Error';
  }
}

/** What a handler's value itself allows: a stream is sent to its own request only; `undefined` is shared, not stored. */
export const decide = (value: unknown): CacheDecision => {
  // Streams are consumed by the one response they are sent to: never shared, never stored.
  if (value instanceof StreamableFile) return 'private';
  if (value !== null && typeof value === 'object' && typeof (value as { pipe?: unknown }).pipe === 'function') return 'private';
  return value === undefined ? 'share' : 'store';
};

/** The class of a value (or of an array's first element) that the serializer cannot keep, or undefined. */
export function lostClass(value: unknown): string | undefined {
  const v = Array.isArray(value) ? (value as unknown[])[0] : value;
  if (v === null || typeof v !== 'object') return undefined;
  const proto = Object.getPrototypeOf(v) as object | null;
  if (proto === null || proto === Object.prototype) return undefined;
  if (v instanceof Date || v instanceof RegExp || v instanceof Map || v instanceof Set || ArrayBuffer.isView(v) || v instanceof ArrayBuffer) return undefined;
  const name = (proto as { constructor?: { name?: string } }).constructor?.name;
  return name || 'a class';
}

/** The parts of an Express `Response` or a Fastify `FastifyReply` the value's decision reads. */
export interface AnyResponse {
  statusCode?: number;
  getHeaders?(): OutgoingHttpHeaders;
  getHeader?(name: string): unknown;
  removeHeader?(name: string): unknown;
}

/**
 * What the response the handler produced (its headers as the route's `@Header()`s, the handler
 * and the interceptors inside this one set them) says about storing its value, by the
 * pipeline's rules (`valueDecision`); undefined outside a response with headers to read. The
 * response's HTTP dates are read against the wall clock, as their definition asks.
 */
export function decisionOf(context: ExecutionContext, route: ValueRoute, before: OwnFields): CacheDecision | undefined {
  const res = context.switchToHttp().getResponse<AnyResponse>();
  if (typeof res.getHeaders !== 'function') return undefined;
  const own = { ...before, ...takeOwnFields(res) };
  return valueDecision({ status: typeof res.statusCode === 'number' ? res.statusCode : 200, headers: { ...res.getHeaders() }, own }, route, Date.now());
}

export const firstValue = (observable: Observable<unknown>): Promise<unknown> => firstValueFrom(observable, { defaultValue: undefined });

/** The handler's value (the first its observable emits), or a `HandlerError` wrapping what it threw. */
export async function handlerValue(observable: Observable<unknown>): Promise<unknown> {
  try {
    return await firstValue(observable);
  } catch (error) {
    throw new HandlerError(error);
  }
}
