// Draws the PWA's PNG icons (the same shape as public/icon.svg) with no image library: node scripts/make-icons.mjs
import { writeFileSync } from "node:fs";
import { deflateSync } from "node:zlib";

const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
const crc = (buf) => {
  let c = 0xffffffff;
  for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
};
function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type), data]);
  const c = Buffer.alloc(4);
  c.writeUInt32BE(crc(td));
  return Buffer.concat([len, td, c]);
}
function png(size, pixel) {
  const raw = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y++) {
    raw[y * (size * 4 + 1)] = 0;
    for (let x = 0; x < size; x++) {
      const [r, g, b, a] = pixel((x + 0.5) / size, (y + 0.5) / size);
      const o = y * (size * 4 + 1) + 1 + x * 4;
      raw[o] = r; raw[o + 1] = g; raw[o + 2] = b; raw[o + 3] = a;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr[8] = 8; ihdr[9] = 6; ihdr[10] = 0; ihdr[11] = 0; ihdr[12] = 0;
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}
const inRound = (x, y, x0, y0, x1, y1, r) => {
  if (x < x0 || x > x1 || y < y0 || y > y1) return false;
  const cx = Math.min(Math.max(x, x0 + r), x1 - r), cy = Math.min(Math.max(y, y0 + r), y1 - r);
  return (x - cx) ** 2 + (y - cy) ** 2 <= r * r;
};
const BG = [0x4f, 0x46, 0xe5, 255], WHITE = [255, 255, 255, 255], NONE = [0, 0, 0, 0];
// u, v in 0..1 of a 64-unit square; `inset` shrinks the drawing for maskable icons' safe zone.
const icon = (maskable) => (u, v) => {
  const s = maskable ? 0.8 : 1, o = (1 - s) / 2;
  if (!maskable && !inRound(u, v, 0, 0, 1, 1, 14 / 64)) return NONE;
  const x = ((u - o) / s) * 64, y = ((v - o) / s) * 64;
  for (const cx of [24, 32, 40]) if ((x - cx) ** 2 + (y - 31) ** 2 <= 9) return BG;
  if (inRound(x, y, 10, 18, 54, 44, 4)) return WHITE;
  if (x >= 20 && x <= 30 && y >= 44 && y <= 52 && y - 44 <= (30 - x) * 0.8) return WHITE;
  return BG;
};
writeFileSync("public/icon-192.png", png(192, icon(false)));
writeFileSync("public/icon-512.png", png(512, icon(false)));
writeFileSync("public/icon-maskable-512.png", png(512, icon(true)));
