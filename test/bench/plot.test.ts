/** The growth plots: a PNG a decoder accepts, points where the data says, and the fit that names the slope. */
import { describe, expect, it } from '@jest/globals';
import { crc32, inflateSync } from 'node:zlib';
import { describeFit, fitGrowth } from './growth-fit.js';
import { COLORS, drawPlot, logTicks, niceStep, renderPlot, tickLabel, type PlotSpec } from './plot.js';

const spec: PlotSpec = {
  title: 'Reconciler cost vs pods',
  panels: [
    {
      title: 'fan-out',
      xLabel: 'pods',
      yLabel: 'seconds',
      xLog: true,
      series: [
        {
          name: 'edit to last pod',
          color: COLORS.blue,
          points: [
            { x: 1000, y: 5 },
            { x: 5000, y: 24 },
            { x: 10000, y: 51 },
          ],
        },
      ],
    },
    {
      title: 'memory',
      xLabel: 'pods',
      yLabel: 'RSS MiB',
      series: [
        {
          name: 'RSS',
          color: COLORS.orange,
          points: [
            { x: 1000, y: 80 },
            { x: 10000, y: 120 },
          ],
        },
      ],
    },
  ],
};

/** The chunks of a PNG, each checked against its CRC. */
function chunks(png: Buffer): { type: string; data: Buffer }[] {
  expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const out: { type: string; data: Buffer }[] = [];
  for (let at = 8; at < png.length;) {
    const len = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    const data = png.subarray(at + 8, at + 8 + len);
    expect(png.readUInt32BE(at + 8 + len)).toBe(crc32(png.subarray(at + 4, at + 8 + len)) >>> 0);
    out.push({ type, data });
    at += 12 + len;
  }
  return out;
}

describe('growth plots', () => {
  it('encode as a PNG whose rows decode to the raster drawn', () => {
    const { raster } = drawPlot(spec);
    const png = renderPlot(spec);
    const cs = chunks(png);
    expect(cs.map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
    const ihdr = cs[0]!.data;
    expect([ihdr.readUInt32BE(0), ihdr.readUInt32BE(4), ihdr[8], ihdr[9]]).toEqual([raster.width, raster.height, 8, 2]);
    const rows = inflateSync(cs[1]!.data);
    const stride = raster.width * 3;
    expect(rows.length).toBe((stride + 1) * raster.height);
    for (const y of [0, 100, raster.height - 1]) {
      expect(rows[y * (stride + 1)]).toBe(0);
      expect(
        Buffer.compare(
          rows.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)),
          Buffer.from(raster.rgb.subarray(y * stride, (y + 1) * stride)),
        ),
      ).toBe(0);
    }
  });

  it('put each point where its value is, in its series colour, higher values higher up', () => {
    const { raster, panels } = drawPlot(spec);
    const points = spec.panels[0]!.series[0]!.points;
    const px = points.map((p) => panels[0]!.toPixel(p.x, p.y));
    for (const p of px) expect(raster.get(p.px, p.py)).toEqual(COLORS.blue);
    expect(px[0]!.py).toBeGreaterThan(px[1]!.py);
    expect(px[1]!.py).toBeGreaterThan(px[2]!.py);
    // Log x: 1k → 10k spans the plot, 5k sits at log(5)/log(10) of it.
    expect((px[1]!.px - px[0]!.px) / (px[2]!.px - px[0]!.px)).toBeCloseTo(Math.log10(5), 2);
    // The second panel's x axis is linear from 0 (640 px panels, plot area 730 → 1250 px): 1,000 of
    // 10,000 sits a tenth of the way along.
    const orange = [panels[1]!.toPixel(1000, 80), panels[1]!.toPixel(10000, 120)];
    for (const o of orange) expect(raster.get(o.px, o.py)).toEqual(COLORS.orange);
    expect(orange.map((o) => o.px)).toEqual([782, 1250]);
  });

  it('ticks: nice steps, 1-2-5 on log axes, short labels', () => {
    expect(niceStep(51)).toBe(20);
    expect(niceStep(4.2)).toBe(1);
    expect(logTicks(1, 100)).toEqual([1, 2, 5, 10, 20, 50, 100]);
    expect(logTicks(1000, 50000)).toEqual([1000, 2000, 5000, 10000, 20000, 50000]);
    expect([2500, 50000, 0.25, 12].map(tickLabel)).toEqual(['2.5k', '50k', '0.25', '12']);
  });
});

describe('growth fit', () => {
  const at = (f: (n: number) => number) => [1000, 2500, 5000, 10000, 25000, 50000].map((x) => ({ x, y: f(x) }));

  it('names the shape the points follow', () => {
    expect(fitGrowth(at((n) => 90 + 0.002 * n)).shape).toBe('n');
    expect(fitGrowth(at((n) => 5 + 1e-7 * n * n)).shape).toBe('n²');
    // Over 1k–50k a straight line explains an exact n log n to R² 0.999: it is called n.
    expect(fitGrowth(at((n) => 3 + 0.0004 * n * Math.log(n))).shape).toBe('n');
    // Noise on a line that n² happens to fit better (R² 0.959 against 0.932), but not by half: n.
    const noise = [1, -1, 1, -1, -1, 1];
    const noisy = (amp: number) =>
      [1000, 2500, 5000, 10000, 25000, 50000].map((x, i) => ({ x, y: 100 + 0.002 * x + amp * noise[i]! }));
    expect(fitGrowth(noisy(10))).toMatchObject({ shape: 'n', r2: 0.932 });
    // More noise: the line explains under 0.8 of the variance and no curve halves its error: unclear.
    expect(fitGrowth(noisy(30))).toMatchObject({ shape: 'unclear', linear: { r2: 0.647 } });
    expect(fitGrowth(at((n) => 1 + 0.5 * Math.log(n))).shape).toBe('log n');
  });

  it('calls a cost flat when it moves less than 10 % across the range, unclear when no shape fits', () => {
    expect(fitGrowth(at((n) => 100 + (n % 3))).shape).toBe('flat');
    const noisy = fitGrowth([1, 3, 10, 30, 100].map((x, i) => ({ x, y: [2.1, 3.4, 2.2, 3.3, 2.4][i]! })));
    expect(noisy.shape).toBe('unclear');
    expect(describeFit(noisy, 'ms')).toMatch(/^no shape fits \(R² < 0\.8\); straight line: /);
  });

  it('states the straight line in words, per the unit asked', () => {
    const fit = fitGrowth(at((n) => 90 + 0.002 * n));
    expect(fit.linear).toEqual({ intercept: 90, slope: 0.002, r2: 1 });
    expect(describeFit(fit, 'MiB', 1000)).toBe(
      'n (R² 1); straight line: +2 MiB per 1000 above 90 MiB (R² 1); ×2.065 over the range',
    );
    expect(() => fitGrowth([{ x: 1, y: 1 }])).toThrow('at least 3 points');
  });
});
