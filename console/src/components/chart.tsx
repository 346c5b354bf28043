import type UPlotType from "uplot";
import { useEffect, useRef } from "preact/hooks";
import type { ChartData } from "../chart-data.ts";

type UPlotClass = typeof UPlotType;

/**
 * A uPlot chart in the returned element, drawn by `make` once uPlot (and its
 * stylesheet) is loaded — with the first chart, not with the first page — and
 * drawn again when `deps` change.
 */
function usePlot(make: (UPlot: UPlotClass, el: HTMLDivElement) => { destroy(): void }, deps: unknown[]) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    let plot: { destroy(): void } | undefined;
    let cancelled = false;
    void Promise.all([import("uplot"), import("uplot/dist/uPlot.min.css")]).then(([{ default: UPlot }]) => {
      if (!cancelled && box.current) plot = make(UPlot, box.current);
    });
    return () => {
      cancelled = true;
      plot?.destroy();
    };
    // The caller names what redraws the chart (`deps`), as with useEffect itself.
  }, deps);
  return box;
}

const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777"];

/**
 * A time-series chart drawn by uPlot (loaded with the first chart, not with
 * the first page). The canvas is described by its caption and by the latest
 * value of each series, for those who do not see it.
 */
export function TimeChart({ title, unit, data }: { title: string; unit: string; data: ChartData }) {
  const box = usePlot(
    (UPlot, el) =>
      new UPlot(
        {
          width: Math.max(260, el.clientWidth),
          height: 180,
          legend: { show: data.series.length > 1 },
          scales: { x: { time: true } },
          axes: [{}, { size: 60, values: (_u, ticks) => ticks.map((t) => compact(t)) }],
          series: [{}, ...data.series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: false }))],
        },
        [data.x, ...data.series.map((s) => s.values)] as never,
        el,
      ),
    [data],
  );
  const latest = data.series.map((s) => `${s.label}: ${lastValue(s.values)} ${unit}`).join("; ");
  return (
    <figure class="chart">
      <figcaption>
        {title} <span class="hint">({unit})</span>
      </figcaption>
      {data.x.length === 0 ? (
        <p class="hint">No points in this range yet: the first appear a minute after the database starts.</p>
      ) : (
        <div ref={box} role="img" aria-label={`${title} chart; latest ${latest}`} data-points={data.x.length} />
      )}
    </figure>
  );
}

function lastValue(values: Array<number | null>): string {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return compact(values[i]!);
  return "none";
}

function compact(n: number): string {
  return new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 }).format(n);
}

/** Bars of labelled amounts (the month's usage), drawn as a chart with the figures beside it in a table. */
export function BarChart({
  title,
  bars,
  format,
}: {
  title: string;
  bars: Array<{ label: string; amount: number }>;
  format: (n: number) => string;
}) {
  const box = usePlot(
    (UPlot, el) => {
      const bar = UPlot.paths.bars!({ size: [0.6, 80] });
      return new UPlot(
        {
          width: Math.max(260, el.clientWidth),
          height: 180,
          legend: { show: false },
          scales: { x: { time: false, range: [-0.5, bars.length - 0.5] } },
          axes: [
            { values: (_u, ticks) => ticks.map((t) => bars[t]?.label ?? ""), splits: () => bars.map((_, i) => i) },
            { size: 60, values: (_u, ticks) => ticks.map((t) => format(t)) },
          ],
          series: [{}, { label: "Amount", fill: "#93c5fd", stroke: "#2563eb", paths: bar, points: { show: false } }],
        },
        [bars.map((_, i) => i), bars.map((b) => b.amount)] as never,
        el,
      );
    },
    [bars],
  );
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}: ${bars.map((b) => `${b.label} ${format(b.amount)}`).join(", ")}`} />
    </figure>
  );
}
