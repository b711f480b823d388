import { applyDecorators, Inject, Injectable, Logger, Optional, SetMetadata, UseInterceptors } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { concatMap, type Observable } from 'rxjs';
import type { DogpileCache } from '../core/cache.js';
import { getDefaultCache } from '../core/default-cache.js';
import { DOGPILE_CACHE, INVALIDATE_TAGS_METADATA } from './constants.js';
import { resolveTags, tagsFor, type CachedTags } from './options.js';

type Fn = (...args: any[]) => unknown;

/**
 * Runs `cache.invalidateTags(tags)` once the handler has succeeded, before its response is
 * sent: a client that reads right after its write does not get what the write replaced.
 * The tags are worked out (and checked) before the handler runs, so bad tags fail the request
 * before it writes anything. A handler that throws invalidates nothing. An invalidation that
 * fails (Redis unreachable) is logged and the response still goes out: the write happened.
 */
@Injectable()
export class InvalidateTagsInterceptor implements NestInterceptor {
  protected readonly logger = new Logger('InvalidateTags');
  private readonly givenCache: DogpileCache | undefined;

  constructor(
    @Inject(Reflector) protected readonly reflector: Reflector,
    @Optional() @Inject(DOGPILE_CACHE) cache?: DogpileCache,
  ) {
    this.givenCache = cache;
  }

  /** The module's cache; without `DogpileModule`, the default (in-process) cache. */
  protected get cache(): DogpileCache {
    return this.givenCache ?? getDefaultCache();
  }

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const given =
      this.reflector.get<CachedTags | undefined>(INVALIDATE_TAGS_METADATA, context.getHandler() as Fn) ??
      this.reflector.get<CachedTags | undefined>(INVALIDATE_TAGS_METADATA, context.getClass());
    const tags = await tagsFor(given, context);
    if (tags === undefined) return next.handle();
    let done: Promise<void> | undefined;
    const invalidate = (): Promise<void> =>
      (done ??= this.cache.invalidateTags(tags).catch((error: unknown) => {
        this.logger.error(`the tags ${tags.join(', ')} could not be invalidated: ${error instanceof Error ? error.message : String(error)}`);
      }));
    return next.handle().pipe(
      concatMap(async (value: unknown) => {
        await invalidate();
        return value;
      }),
    );
  }
}

/**
 * Invalidates tags after the handler succeeds (on a controller method, or on the class for
 * each of its routes): every value cached with one of them (`@Cached({ tags })`, an HTTP
 * adapter's `tags` option or `Dogpile-Tags` header, `getOrCompute(..., { tags })`) becomes a
 * miss in every process sharing the cache.
 *
 * ```ts
 * @Put(':id') @InvalidateTags((ctx) => ['product:' + ctx.switchToHttp().getRequest().params.id])
 * update(@Param('id') id: string, @Body() body: ProductDto) { ... }
 * ```
 *
 * `tags` is a list (checked when the decorator is applied) or a function of the execution
 * context (checked on each request, before the handler runs): at most `MAX_TAGS` (64)
 * non-empty strings, else an `InvalidOptionError`.
 */
export function InvalidateTags(tags: CachedTags): MethodDecorator & ClassDecorator {
  const resolved = resolveTags(tags);
  return applyDecorators(SetMetadata(INVALIDATE_TAGS_METADATA, resolved), UseInterceptors(InvalidateTagsInterceptor));
}
