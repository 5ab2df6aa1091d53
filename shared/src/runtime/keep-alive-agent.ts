/**
 * The keep-alive agents the API client sends every request through. Node 24's
 * https.Agent#createConnection registers the socket's 'session' listener (TLS session reuse) in a scope
 * that also holds its callback argument: the agent's `oncreate`, whose scope holds the request that
 * opened the socket. So every keep-alive socket kept its first request alive for as long as it lived,
 * and with it the response and whatever the response's listeners hold — for the informer's first LIST
 * page, the raw body and the parsed page, megabytes per socket (a watch keeps its socket for minutes).
 * The default createConnection returns the socket and never calls the callback unless it tunnels
 * through a proxy, which these agents are never configured for; so the callback is not passed on.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';

class HttpsKeepAliveAgent extends https.Agent {
  override createConnection(options: https.RequestOptions): Duplex | null | undefined {
    return super.createConnection(options);
  }
}

export function keepAliveAgent(protocol: 'https:' | 'http:', maxSockets: number): http.Agent {
  return protocol === 'https:'
    ? new HttpsKeepAliveAgent({ keepAlive: true, maxSockets })
    : new http.Agent({ keepAlive: true, maxSockets });
}
