import { Inject } from '@nestjs/common';
import { DOGPILE_CACHE } from './constants.js';

/**
 * Injects the module's `DogpileCache`, for direct `getOrCompute` calls in a service:
 *
 * ```ts
 * constructor(@InjectCache() private readonly cache: DogpileCache) {}
 * ```
 */
export function InjectCache(): PropertyDecorator & ParameterDecorator {
  return Inject(DOGPILE_CACHE);
}
