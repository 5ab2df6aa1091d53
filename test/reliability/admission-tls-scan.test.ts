/**
 * A TLS scan of the running admission service's webhook port, three ways:
 *
 * 1. Raw TLS 1.2 ClientHellos, one per cipher suite id, for every id of the IANA ranges 0x0000-0x00FE,
 *    0xC000-0xC0FF and 0xCCA8-0xCCAE (NULL, EXPORT, RC4, DES/3DES, CBC, static-RSA and DHE key
 *    exchange, PSK, anonymous, CCM, ...): built by hand, so suites the local OpenSSL can no longer offer
 *    (RC4, 3DES) are scanned too. The server must answer a ServerHello only for ECDHE suites with an AEAD
 *    cipher (GCM, ChaCha20-Poly1305) and a handshake_failure alert for everything else.
 * 2. TLS 1.0 and 1.1 ClientHellos (raw and through Node's tls.connect) get a protocol_version alert;
 *    TLS 1.3 is accepted with each of its three standard suites; HTTP/2 is not negotiated.
 * 3. The same verdicts from `openssl s_client` (a second, independent client).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { useTestEnv } from '../support/cluster.js';
import { run } from '../support/processes.js';
import { installCrds } from '../support/crds.js';
import { type RunningAdmission, startAdmission } from '../support/services.js';

const env = useTestEnv();
let svc: RunningAdmission;

beforeAll(async () => {
  await installCrds(env);
  svc = await startAdmission(env);
}, 60_000);

afterAll(async () => {
  await svc?.stop();
});

const u16 = (n: number) => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
const u24 = (n: number) => Buffer.from([(n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
const ext = (type: number, data: Buffer) => Buffer.concat([u16(type), u16(data.length), data]);

/** A ClientHello record offering exactly `suites`, with the extensions an ECDHE handshake needs. */
function clientHello(version: number, suites: number[]): Buffer {
  const list = Buffer.concat([u16(suites.length * 2), ...suites.map(u16)]);
  const groups = [0x001d, 0x0017, 0x0018]; // x25519, secp256r1, secp384r1
  const sigalgs = [0x0804, 0x0805, 0x0806, 0x0401, 0x0501, 0x0601, 0x0403, 0x0503, 0x0201, 0x0203];
  const extensions = Buffer.concat([
    ext(0x000a, Buffer.concat([u16(groups.length * 2), ...groups.map(u16)])),
    ext(0x000b, Buffer.from([1, 0])),
    ext(0x000d, Buffer.concat([u16(sigalgs.length * 2), ...sigalgs.map(u16)])),
    ext(0xff01, Buffer.from([0])),
  ]);
  const body = Buffer.concat([
    u16(version),
    randomBytes(32),
    Buffer.from([0]), // no session id
    list,
    Buffer.from([1, 0]), // compression: null only
    u16(extensions.length),
    extensions,
  ]);
  const handshake = Buffer.concat([Buffer.from([1]), u24(body.length), body]);
  return Buffer.concat([Buffer.from([0x16, 0x03, 0x01]), u16(handshake.length), handshake]);
}

type Verdict = { accepted: true; version: number; suite: number } | { accepted: false; alert: number | 'closed' };

/** Sends one ClientHello and reads the first record back: a ServerHello, an alert, or nothing. */
function probe(hello: Buffer): Promise<Verdict> {
  return new Promise((ok, fail) => {
    const s = net.connect(svc.port, '127.0.0.1', () => s.write(hello));
    let buf = Buffer.alloc(0);
    const done = (v: Verdict) => {
      s.destroy();
      ok(v);
    };
    s.setTimeout(10_000, () => fail(new Error('no answer to a ClientHello in 10 s')));
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length < 5) return;
      const type = buf[0]!;
      if (type === 0x15 && buf.length >= 7) return done({ accepted: false, alert: buf[6]! });
      // Handshake record: ServerHello = type 2, then version (2), random (32), session id (1 + n), suite (2).
      if (type === 0x16 && buf.length >= 5 + 4 + 2 + 32 + 1) {
        const sidLen = buf[5 + 4 + 2 + 32]!;
        const at = 5 + 4 + 2 + 32 + 1 + sidLen;
        if (buf.length < at + 2) return;
        if (buf[5] !== 2) return fail(new Error(`unexpected handshake message ${buf[5]}`));
        return done({ accepted: true, version: buf.readUInt16BE(9), suite: buf.readUInt16BE(at) });
      }
      if (type !== 0x15 && type !== 0x16) fail(new Error(`unexpected record type ${type}`));
    });
    s.on('end', () => done({ accepted: false, alert: 'closed' }));
    s.on('error', () => done({ accepted: false, alert: 'closed' }));
  });
}

/** ECDHE key exchange with an AEAD cipher: the only TLS 1.2 suites allowed. */
const ECDHE_AEAD: Record<number, string> = {
  0xc02b: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  0xc02c: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  0xc02f: 'ECDHE-RSA-AES128-GCM-SHA256',
  0xc030: 'ECDHE-RSA-AES256-GCM-SHA384',
  0xcca8: 'ECDHE-RSA-CHACHA20-POLY1305',
  0xcca9: 'ECDHE-ECDSA-CHACHA20-POLY1305',
};
/** A few named ones, so the report says what was refused (every id in the ranges is scanned anyway). */
const NAMED: Record<number, string> = {
  0x0000: 'NULL-NULL',
  0x0002: 'NULL-SHA',
  0x0004: 'RC4-MD5',
  0x0005: 'RC4-SHA',
  0x000a: 'DES-CBC3-SHA',
  0x002f: 'AES128-SHA (static RSA, CBC)',
  0x003b: 'NULL-SHA256',
  0x009c: 'AES128-GCM-SHA256 (static RSA, AEAD)',
  0x009e: 'DHE-RSA-AES128-GCM-SHA256 (DHE, AEAD)',
  0x00a8: 'PSK-AES128-GCM-SHA256',
  0xc011: 'ECDHE-RSA-RC4-SHA',
  0xc012: 'ECDHE-RSA-DES-CBC3-SHA',
  0xc013: 'ECDHE-RSA-AES128-SHA (CBC)',
  0xc027: 'ECDHE-RSA-AES128-SHA256 (CBC)',
  0xc028: 'ECDHE-RSA-AES256-SHA384 (CBC)',
  0xc09c: 'AES128-CCM (static RSA)',
  0xc0ac: 'ECDHE-ECDSA-AES128-CCM',
  0xccaa: 'DHE-RSA-CHACHA20-POLY1305',
};

const hex = (n: number) => `0x${n.toString(16).padStart(4, '0')}`;

describe('TLS scan of the webhook port', () => {
  it('TLS 1.2: a ServerHello only for ECDHE + AEAD suites; every other suite id is refused', async () => {
    const ids = [
      ...Array.from({ length: 0xff }, (_, i) => i), // 0x0000-0x00FE (0x00FF is the renegotiation SCSV)
      ...Array.from({ length: 0x100 }, (_, i) => 0xc000 + i),
      ...Array.from({ length: 7 }, (_, i) => 0xcca8 + i),
      0x1301,
      0x1302,
      0x1303, // TLS 1.3 suites have no meaning in a TLS 1.2 handshake
    ];
    const verdicts = new Map<number, Verdict>();
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < ids.length) {
          const id = ids[next++]!;
          verdicts.set(id, await probe(clientHello(0x0303, [id])));
        }
      }),
    );
    const accepted = [...verdicts].filter(([, v]) => v.accepted).map(([id]) => id);
    const refused = [...verdicts].filter(([, v]) => !v.accepted);
    console.log(
      `TLS 1.2 scan: ${ids.length} suite ids, accepted ${accepted.map((id) => ECDHE_AEAD[id] ?? hex(id)).join(', ')}; ` +
        `refused ${refused.length} (alerts: ${[...new Set(refused.map(([, v]) => (v.accepted ? '' : v.alert)))].join(', ')}), among them ` +
        Object.entries(NAMED)
          .map(([id, name]) => `${name}: ${verdicts.get(Number(id))?.accepted ? 'ACCEPTED' : 'refused'}`)
          .join('; '),
    );
    // Nothing but ECDHE + AEAD, and those the certificate's key type allows are really accepted.
    expect(accepted.filter((id) => !(id in ECDHE_AEAD)).map(hex)).toEqual([]);
    expect(accepted.length).toBeGreaterThanOrEqual(3);
    for (const [id, v] of verdicts) {
      if (v.accepted)
        expect({ id: hex(id), version: v.version, suite: v.suite }).toEqual({
          id: hex(id),
          version: 0x0303,
          suite: id,
        });
      // 40 = handshake_failure: the server looked at the offer and had nothing in common with it.
      else expect({ id: hex(id), alert: v.alert }).toEqual({ id: hex(id), alert: 40 });
    }
  }, 120_000);

  it('TLS 1.0 and 1.1 are refused with protocol_version, whatever the suites', async () => {
    const cbc = [0xc013, 0xc014, 0x002f, 0x0035, 0x000a];
    for (const version of [0x0301, 0x0302]) {
      // 70 = protocol_version
      expect(await probe(clientHello(version, cbc))).toEqual({ accepted: false, alert: 70 });
      expect(await probe(clientHello(version, Object.keys(ECDHE_AEAD).map(Number)))).toEqual({
        accepted: false,
        alert: 70,
      });
    }
    for (const maxVersion of ['TLSv1', 'TLSv1.1'] as const) {
      await expect(handshake({ minVersion: 'TLSv1', maxVersion, ciphers: 'DEFAULT:@SECLEVEL=0' })).rejects.toThrow(
        /alert protocol version/,
      );
    }
  });

  it('TLS 1.3 is accepted with each standard suite; TLS 1.2 through Node picks ECDHE + AEAD; no HTTP/2', async () => {
    for (const suite of ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256']) {
      expect(await handshake({ minVersion: 'TLSv1.3', ciphers: suite })).toMatchObject({
        protocol: 'TLSv1.3',
        cipher: suite,
      });
    }
    const tls12 = await handshake({ maxVersion: 'TLSv1.2' });
    expect(tls12.protocol).toBe('TLSv1.2');
    expect(tls12.cipher).toMatch(/^ECDHE-(RSA|ECDSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$/);
    expect((await handshake({ ALPNProtocols: ['h2', 'http/1.1'] })).alpn).not.toBe('h2');
  });

  it('openssl s_client agrees: 1.0/1.1 refused, CBC/NULL/static-RSA refused, 1.2 AEAD and 1.3 accepted', async () => {
    const sClient = async (args: string[]) => {
      const r = await run('openssl', ['s_client', '-connect', `127.0.0.1:${svc.port}`, ...args], {
        input: '',
        timeoutMs: 15_000,
      });
      const m = /Cipher is (\S+)/.exec(r.stdout + r.stderr);
      return m && m[1] !== '(NONE)'
        ? m[1]
        : `refused: ${/alert [a-z ]+/.exec(r.stderr)?.[0] ?? r.stderr.slice(0, 120)}`;
    };
    const results = {
      tls1: await sClient(['-tls1', '-cipher', 'DEFAULT:@SECLEVEL=0']),
      tls1_1: await sClient(['-tls1_1', '-cipher', 'DEFAULT:@SECLEVEL=0']),
      cbc: await sClient(['-tls1_2', '-cipher', 'ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA384:AES256-SHA256']),
      null: await sClient(['-tls1_2', '-cipher', 'NULL-SHA256:ECDHE-RSA-NULL-SHA:@SECLEVEL=0']),
      staticRsaAead: await sClient(['-tls1_2', '-cipher', 'AES128-GCM-SHA256:AES256-GCM-SHA384']),
      dheAead: await sClient(['-tls1_2', '-cipher', 'DHE-RSA-AES128-GCM-SHA256:DHE-RSA-CHACHA20-POLY1305']),
      tls1_2: await sClient(['-tls1_2']),
      tls1_3: await sClient(['-tls1_3']),
    };
    console.log(`openssl s_client: ${JSON.stringify(results)}`);
    expect(results).toEqual({
      tls1: expect.stringMatching(/^refused: alert protocol version/),
      tls1_1: expect.stringMatching(/^refused: alert protocol version/),
      cbc: expect.stringMatching(/^refused: alert handshake failure/),
      null: expect.stringMatching(/^refused: alert handshake failure/),
      staticRsaAead: expect.stringMatching(/^refused: alert handshake failure/),
      dheAead: expect.stringMatching(/^refused: alert handshake failure/),
      tls1_2: expect.stringMatching(/^ECDHE-(RSA|ECDSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$/),
      tls1_3: expect.stringMatching(/^TLS_(AES_(128|256)_GCM_SHA(256|384)|CHACHA20_POLY1305_SHA256)$/),
    });
  });
});

function handshake(
  opts: tls.ConnectionOptions,
): Promise<{ protocol: string | null; cipher: string; alpn: string | false | null }> {
  return new Promise((ok, fail) => {
    const s = tls.connect({ host: '127.0.0.1', port: svc.port, ca: env.info.webhookCaPem, ...opts }, () => {
      ok({ protocol: s.getProtocol(), cipher: s.getCipher().name, alpn: s.alpnProtocol ?? null });
      s.end();
    });
    s.on('error', fail);
  });
}
