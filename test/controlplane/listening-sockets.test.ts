import { afterAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:net';
import { decodeProcAddress, listeningAddresses } from './listening-sockets.js';

describe('decodeProcAddress', () => {
  it('decodes IPv4 rows of /proc/net/tcp (little-endian address, hex port)', () => {
    expect(decodeProcAddress('0100007F:1F90')).toBe('127.0.0.1:8080');
    expect(decodeProcAddress('00000000:0050')).toBe('0.0.0.0:80');
  });
  it('decodes IPv6 rows of /proc/net/tcp6 (four little-endian words)', () => {
    expect(decodeProcAddress('00000000000000000000000001000000:1F90')).toBe('[0:0:0:0:0:0:0:1]:8080');
    expect(decodeProcAddress('00000000000000000000000000000000:0016')).toBe('[0:0:0:0:0:0:0:0]:22');
  });
});

describe('listeningAddresses', () => {
  const servers: Server[] = [];
  const listen = (host: string) =>
    new Promise<number>((resolve) => {
      const s = createServer().listen(0, host, () => resolve((s.address() as { port: number }).port));
      servers.push(s);
    });
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  it("lists this process's own listeners with their bound address, not other processes'", async () => {
    const loop = await listen('127.0.0.1');
    // A second loopback address: decoding is checked on another value without listening off loopback.
    const other = await listen('127.0.0.2');
    const mine = listeningAddresses(process.pid);
    expect(mine).toContain(`127.0.0.1:${loop}`);
    expect(mine).toContain(`127.0.0.2:${other}`);
    // Every entry is one of ours: nothing else in this jest worker listens.
    expect(mine.filter((a) => !a.endsWith(`:${loop}`) && !a.endsWith(`:${other}`))).toEqual([]);
  });
});
