import { ConfigurableModuleBuilder, type ConfigurableModuleAsyncOptions } from '@nestjs/common';
import type { DogpileModuleOptions } from './options.js';

/** Makes `DogpileModule.forRoot()` / `forRootAsync()` (which call it) and the options token. */
export const { ConfigurableModuleClass: DogpileConfigurableModule, MODULE_OPTIONS_TOKEN: DOGPILE_MODULE_OPTIONS } = new ConfigurableModuleBuilder<DogpileModuleOptions>({ moduleName: 'Dogpile' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: false }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

/** What `DogpileModule.forRoot()` takes: the module options plus `isGlobal`. */
export type DogpileModuleForRootOptions = DogpileModuleOptions & { isGlobal?: boolean };
/** What `DogpileModule.forRootAsync()` takes: `useFactory` / `useClass` / `useExisting`, `inject`, `imports`, `isGlobal`. */
export type DogpileModuleAsyncOptions = ConfigurableModuleAsyncOptions<DogpileModuleOptions, 'create'> & { isGlobal?: boolean };
