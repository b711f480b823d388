/**
 * The framework-neutral HTTP layer shared by the Express, Fastify and Nest adapters: cache
 * key, cacheability rules, capture of a handler's response, and the stored-response format.
 */
export { HttpGuard, type CachePlan, type Exchange, type HttpRequestInfo } from './guard.js';
export { HTTP_CACHE_DEFAULTS, resolveHttpCacheOptions, resolvePrivateHeaders, type HttpCacheOptions, type ResolvedHttpCacheOptions } from './options.js';
export { defaultCacheKey, escapeKey, isValidHost, requestHost, sortQuery, userCacheKey, varyKeySuffix, HTTP_KEY_PREFIX, UNKEYED_INPUT_HEADERS } from './cache-key.js';
export { requestBypassReason, responseNotStorableReason, type ResponseFacts } from './cacheability.js';
export { ResponseCapture, captureServerResponse, capturePayload, watchClientGone, type CapturedResponse } from './capture.js';
export { storableHeaders, parseVary, headerValue, type HeaderEntry } from './headers.js';
export { encodeResponse, decodeResponse, ResponseFormatError, type StoredResponse } from './response-format.js';
export { prepareResponse, toServable, varyMatches, writeServerResponse, xCacheFor, type PreparedResponse, type ServableResponse, type XCache } from './serve.js';
export { collectBody, servedInstructions, type HandlerResponse, type HeaderFields, type PipelineRequest, type RefreshMode, type Replay, type ReplayRequest, type ResponseInstructions } from './pipeline.js';
