import type { AddressInfo, ListenOptions, Server } from 'node:net';

/**
 * SO_REUSEPORT (Node >= 22.12; older versions ignore it): pods of one Deployment on the host network of
 * one node bind the same port side by side, so a rolling update starts the new pod before the old one
 * stops instead of failing with EADDRINUSE. Only processes of the same uid can join the port.
 */
export const REUSE_PORT = { reusePort: true } as ListenOptions;

/** Binds `server` (HTTP or HTTPS) and resolves with the bound port; a bind error rejects instead of crashing. */
export async function listenOn(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen({ ...REUSE_PORT, port, host }, () => {
      server.off('error', fail);
      ok();
    });
  });
  return (server.address() as AddressInfo).port;
}
