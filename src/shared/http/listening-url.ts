import type { AddressInfo } from 'net';

/**
 * The URL the API is bound to, as the start line says it: the bound address itself (0.0.0.0 or ::
 * when listening on every interface), not Nest's getUrl(), which names 127.0.0.1 for them.
 */
export function listeningUrl(address: AddressInfo | string | null): string {
  if (!address) return 'an unknown address';
  if (typeof address === 'string') return address; // a Unix socket path
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}
