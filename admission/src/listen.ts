import type { AddressInfo, Server } from 'node:net';

/** Binds `server` (HTTP or HTTPS) and resolves with the bound port; a bind error rejects instead of crashing. */
export async function listenOn(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(port, host, () => {
      server.off('error', fail);
      ok();
    });
  });
  return (server.address() as AddressInfo).port;
}
