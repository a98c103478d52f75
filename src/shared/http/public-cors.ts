import type { FastifyInstance } from 'fastify';

/**
 * CORS of the public documents (the JWKS and the discovery metadata): any browser relying party
 * (oidc-client-ts, a SPA verifying tokens) may read them, without credentials, whatever
 * CORS_ORIGINS says. Set per route (`@RouteConfig({ cors: PUBLIC_CORS })`, which @fastify/cors
 * merges over the API's options), so every other request keeps the plugin's static options: a
 * per-request options delegator had the plugin rebuild its options on every request.
 */
export const PUBLIC_CORS = { origin: '*', credentials: false, methods: ['GET', 'HEAD'], maxAge: 600, exposedHeaders: null } as const;

/** The path prefix of the public documents. */
export const PUBLIC_DOCUMENTS_PREFIX = '/.well-known/';

/** Preflights of the public documents (the plugin's own OPTIONS route carries the API's options). */
export function installPublicPreflight(fastify: FastifyInstance): void {
  fastify.options(`${PUBLIC_DOCUMENTS_PREFIX}*`, { config: { cors: PUBLIC_CORS } } as never, (_req, reply) => {
    reply.send();
  });
}
