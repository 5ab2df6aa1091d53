/**
 * A truecolour PNG from an RGB raster: the bench draws its growth plots itself (no plotting package and
 * no image tool on the machine), so it needs only the file format — IHDR, one zlib-compressed IDAT with
 * filter 0 on every row, IEND, each chunk with its CRC-32.
 */
import { crc32, deflateSync } from 'node:zlib';

export interface Raster {
  width: number;
  height: number;
  /** width × height × 3 bytes, row by row. */
  rgb: Uint8Array;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

export function encodePng(r: Raster): Buffer {
  if (r.rgb.length !== r.width * r.height * 3)
    throw new Error(`raster is ${r.rgb.length} bytes, not ${r.width}×${r.height}×3`);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(r.width, 0);
  ihdr.writeUInt32BE(r.height, 4);
  ihdr[8] = 8; // bits per channel
  ihdr[9] = 2; // truecolour, no alpha
  // bytes 10–12: deflate, adaptive filtering, no interlace (all 0)
  const stride = r.width * 3;
  const rows = Buffer.alloc((stride + 1) * r.height);
  for (let y = 0; y < r.height; y++) rows.set(r.rgb.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  return Buffer.concat([
    SIGNATURE,
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(rows, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
