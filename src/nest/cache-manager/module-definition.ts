import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { CacheModuleOptions } from './options.js';

/** Makes `CacheModule.register()` / `registerAsync()` (which call it) and the options token. */
export const { ConfigurableModuleClass: CacheManagerConfigurableModule, MODULE_OPTIONS_TOKEN: CACHE_MODULE_OPTIONS } = new ConfigurableModuleBuilder<CacheModuleOptions>({
  moduleName: 'DogpileCacheManager',
})
  .setFactoryMethodName('createCacheOptions')
  .build();
