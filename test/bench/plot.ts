/**
 * Line charts as PNG for the bench's growth sections: panels side by side, each with its axes, ticks,
 * grid, series (lines with point markers) and a legend. Both axes are linear from 0 unless the x axis is
 * asked to be logarithmic: a cost proportional to size then draws as a straight line, a flat one flat.
 */
import { GLYPH_HEIGHT, GLYPH_WIDTH, glyphRows } from './bitmap-font.js';
import { encodePng, type Raster } from './png.js';

export type Rgb = readonly [number, number, number];

export interface Series {
  name: string;
  color: Rgb;
  points: readonly { x: number; y: number }[];
}

export interface Panel {
  title: string;
  xLabel: string;
  yLabel: string;
  xLog?: boolean;
  series: readonly Series[];
}

export interface PlotSpec {
  title: string;
  panels: readonly Panel[];
  panelWidth?: number;
  height?: number;
}

export const COLORS = {
  blue: [31, 100, 180],
  orange: [230, 120, 20],
  green: [40, 150, 60],
  red: [200, 40, 40],
} as const satisfies Record<string, Rgb>;

const WHITE: Rgb = [255, 255, 255];
const INK: Rgb = [40, 40, 40];
const GRID: Rgb = [225, 225, 225];
const TEXT = 2; // glyph scale: 10 × 14 px characters

class Canvas implements Raster {
  readonly rgb: Uint8Array;
  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.rgb = new Uint8Array(width * height * 3).fill(255);
  }

  set(x: number, y: number, c: Rgb): void {
    x = Math.round(x);
    y = Math.round(y);
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    this.rgb.set(c, (y * this.width + x) * 3);
  }

  get(x: number, y: number): Rgb {
    const i = (Math.round(y) * this.width + Math.round(x)) * 3;
    return [this.rgb[i]!, this.rgb[i + 1]!, this.rgb[i + 2]!];
  }

  rect(x: number, y: number, w: number, h: number, c: Rgb): void {
    for (let j = 0; j < h; j++) for (let i = 0; i < w; i++) this.set(x + i, y + j, c);
  }

  /** A line `thick` pixels wide (a square brush along the segment). */
  line(x0: number, y0: number, x1: number, y1: number, c: Rgb, thick = 1): void {
    const steps = Math.max(1, Math.ceil(Math.max(Math.abs(x1 - x0), Math.abs(y1 - y0))));
    const off = Math.floor((thick - 1) / 2);
    for (let s = 0; s <= steps; s++) {
      const x = x0 + ((x1 - x0) * s) / steps;
      const y = y0 + ((y1 - y0) * s) / steps;
      this.rect(Math.round(x) - off, Math.round(y) - off, thick, thick, c);
    }
  }

  textWidth(s: string, scale = TEXT): number {
    return s.length * (GLYPH_WIDTH + 1) * scale - scale;
  }

  /** Calls `put(along, across)` for every lit pixel of `s`: along the text's baseline, across it downwards. */
  private glyphs(s: string, scale: number, put: (along: number, across: number) => void): void {
    [...s].forEach((ch, k) =>
      glyphRows(ch).forEach((bits, row) => {
        for (let col = 0; col < GLYPH_WIDTH; col++)
          if (bits & (1 << (GLYPH_WIDTH - 1 - col))) put((k * (GLYPH_WIDTH + 1) + col) * scale, row * scale);
      }),
    );
  }

  text(s: string, x: number, y: number, c: Rgb = INK, scale = TEXT): void {
    this.glyphs(s, scale, (along, across) => this.rect(x + along, y + across, scale, scale, c));
  }

  /** Text turned a quarter left (for the y axis label), read from bottom to top. */
  textUp(s: string, x: number, y: number, c: Rgb = INK, scale = TEXT): void {
    this.glyphs(s, scale, (along, across) => this.rect(x + across, y - along, scale, scale, c));
  }
}

/** 1, 2 or 5 × a power of ten, the smallest such step giving at most `count` intervals up to max. */
export function niceStep(max: number, count = 5): number {
  if (!(max > 0)) return 1;
  const raw = max / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

/** Ticks of a log axis: 1, 2, 5 × powers of ten inside [min, max] (only decades when that is too many). */
export function logTicks(min: number, max: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++)
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= min * 0.999 && v <= max * 1.001) out.push(v);
    }
  return out.length > 8 ? out.filter((v) => Math.log10(v) % 1 === 0) : out;
}

/** A tick label: 1k for 1000, 2.5k for 2500, 50k; plain below 1000. */
export function tickLabel(v: number): string {
  if (Math.abs(v) >= 1000) return `${+(v / 1000).toFixed(1)}k`;
  return String(+v.toPrecision(3));
}

export interface PanelLayout {
  /** Data → pixel, for the panel's plot area. */
  toPixel(x: number, y: number): { px: number; py: number };
}

function drawPanel(cv: Canvas, p: Panel, left: number, top: number, w: number, h: number): PanelLayout {
  // Title, then the legend in a row above the plot area (inside it, it would hide points).
  const area = { x: left + 90, y: top + 62, w: w - 120, h: h - 132 };
  const pts = p.series.flatMap((s) => s.points);
  const xs = pts.map((q) => q.x);
  // A linear axis starts at 0, so a cost proportional to size is a straight line through the origin's side.
  const xMin = p.xLog ? Math.min(...xs) : 0;
  const xStep = niceStep(Math.max(...xs));
  const xMax = p.xLog ? Math.max(...xs) : xStep * Math.ceil(Math.max(...xs) / xStep);
  const yStep = niceStep(Math.max(...pts.map((q) => q.y), 0) * 1.05);
  const yTop = yStep * Math.max(1, Math.ceil((Math.max(...pts.map((q) => q.y), 0) * 1.05) / yStep));
  const xPos = (x: number) => {
    if (xMax === xMin) return area.x + area.w / 2;
    const f = p.xLog ? (Math.log(x) - Math.log(xMin)) / (Math.log(xMax) - Math.log(xMin)) : (x - xMin) / (xMax - xMin);
    return area.x + f * area.w;
  };
  const yPos = (y: number) => area.y + area.h - (y / yTop) * area.h;

  cv.text(p.title, left + (w - cv.textWidth(p.title)) / 2, top + 8);
  for (let v = 0; v <= yTop + yStep / 2; v += yStep) {
    const y = yPos(v);
    cv.line(area.x, y, area.x + area.w, y, GRID);
    const label = tickLabel(v);
    cv.text(label, area.x - 8 - cv.textWidth(label), y - (GLYPH_HEIGHT * TEXT) / 2);
  }
  const xTicks = p.xLog
    ? logTicks(xMin, xMax)
    : Array.from({ length: Math.round(xMax / xStep) + 1 }, (_, i) => i * xStep);
  for (const v of xTicks) {
    const x = xPos(v);
    cv.line(x, area.y, x, area.y + area.h, GRID);
    const label = tickLabel(v);
    cv.text(label, x - cv.textWidth(label) / 2, area.y + area.h + 8);
  }
  cv.line(area.x, area.y, area.x, area.y + area.h, INK, 2);
  cv.line(area.x, area.y + area.h, area.x + area.w, area.y + area.h, INK, 2);
  cv.text(p.xLabel, area.x + (area.w - cv.textWidth(p.xLabel)) / 2, area.y + area.h + 36);
  cv.textUp(p.yLabel, left + 8, area.y + (area.h + cv.textWidth(p.yLabel)) / 2);

  for (const s of p.series) {
    const sorted = [...s.points].sort((a, b) => a.x - b.x);
    sorted.forEach((q, i) => {
      const { x, y } = { x: xPos(q.x), y: yPos(q.y) };
      if (i > 0) cv.line(xPos(sorted[i - 1]!.x), yPos(sorted[i - 1]!.y), x, y, s.color, 2);
      cv.rect(x - 3, y - 3, 7, 7, s.color);
    });
  }
  let lx = area.x;
  for (const s of p.series) {
    cv.rect(lx, top + 37, 18, 8, s.color);
    cv.text(s.name, lx + 26, top + 34);
    lx += 26 + cv.textWidth(s.name) + 24;
  }
  return { toPixel: (x, y) => ({ px: xPos(x), py: yPos(y) }) };
}

/** The chart as a raster plus each panel's data → pixel mapping (for tests), before encoding. */
export function drawPlot(spec: PlotSpec): {
  raster: Raster & { get(x: number, y: number): Rgb };
  panels: PanelLayout[];
} {
  const pw = spec.panelWidth ?? 640;
  const h = spec.height ?? 480;
  const top = 40;
  const cv = new Canvas(pw * spec.panels.length, h + top);
  cv.rect(0, 0, cv.width, cv.height, WHITE);
  cv.text(spec.title, (cv.width - cv.textWidth(spec.title)) / 2, 12);
  const panels = spec.panels.map((p, i) => drawPanel(cv, p, i * pw, top, pw, h));
  return { raster: cv, panels };
}

export function renderPlot(spec: PlotSpec): Buffer {
  return encodePng(drawPlot(spec).raster);
}
