//! The charts of the HTML report, one function per chart, each drawn with plotters into an SVG
//! string that the page embeds inline (no image files, nothing fetched).
//!
//! Charts take plain numbers plus at most a label: every name that reaches a chart goes
//! through plotters' SVG backend, which escapes text and attribute values itself, so a model
//! cannot inject markup through a chart either. Each chart bounds the number of SVG elements
//! it emits (aggregating layers, de-duplicating scatter points by pixel), so the page stays
//! small however large the network is.

use crate::compare::details::LayerDetail;
use crate::compare::stats::Histogram as ErrorHistogram;
use crate::outcome::{Comparison, LayerResult, LayerStatus};
use crate::report::format::severity;
use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::HashSet;

/// Above this many layers, the network chart draws the maximum per bucket of layers.
pub const MAX_NETWORK_POINTS: usize = 500;
/// Error relative to range drawn at the bottom of the log axis when it is 0 (identical).
const FLOOR: f64 = 1e-12;
/// Channels drawn as separate bars; more are drawn as one line.
const MAX_CHANNEL_BARS: usize = 256;
/// Rows the error histogram leaves room for, however few bins are filled.
const MIN_HISTOGRAM_ROWS: usize = 8;
/// Scatter points are de-duplicated on a grid this fine (about one screen pixel).
const SCATTER_GRID: f64 = 320.0;

const INK: RGBColor = RGBColor(51, 51, 51);
const PASS: RGBColor = RGBColor(44, 110, 180);
const FAIL: RGBColor = RGBColor(200, 40, 40);
const INHERITED: RGBColor = RGBColor(235, 140, 120);
const TOLERANCE: RGBColor = RGBColor(60, 150, 70);
/// The isolated-error curve: apart from the blues and reds of the accumulated one.
const ISOLATED: RGBColor = RGBColor(118, 42, 131);
const GRID: RGBColor = RGBColor(232, 232, 232);
const FONT: &str = "sans-serif";

/// Plotters' drawing errors carry the backend's error type; the report only needs the text.
fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e}")
}

/// Runs `draw` on a white SVG canvas of `size` and returns the SVG text.
fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>,
) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The tolerance of a layer as an error relative to its range: an element with reference 0
/// may be off by `Tolerance::bound_for`'s absolute part, so for the largest error the bound
/// is at least that over the range. Rough (rtol is left out), but it puts the line where a
/// reader expects a failing layer to cross it. None when the reference is all zeros.
pub fn tolerance_rel_to_range(cmp: &Comparison) -> Option<f64> {
    let range = cmp.ref_max_abs;
    (range > 0.0 && range.is_finite()).then(|| tolerance_abs(cmp) / range)
}

/// The absolute error an element with reference 0 may have: the bound's absolute part,
/// `atol * max(1, max|ref|)`.
pub fn tolerance_abs(cmp: &Comparison) -> f64 {
    cmp.tol.bound_for(cmp.ref_max_abs).atol_scaled
}

/// A value on the log axis: 0 sits on the floor, infinities and NaN on the ceiling.
fn on_log_axis(v: f64, ceiling: f64) -> f64 {
    if v.is_nan() || v.is_infinite() {
        ceiling
    } else {
        v.clamp(FLOOR, ceiling)
    }
}

/// One drawn point of the network chart: a layer, or the worst layer of a bucket.
struct NetworkPoint {
    x: f64,
    error: f64,
    tolerance: Option<f64>,
    fails: bool,
    /// Failing because of an upstream layer only.
    inherited: bool,
    /// The worst error in isolation, where isolation measured some layer of the point.
    isolated: Option<f64>,
    /// Some layer of the point fails in isolation.
    isolated_fails: bool,
}

fn network_points(layers: &[LayerResult]) -> (Vec<NetworkPoint>, usize) {
    let bucket = layers.len().div_ceil(MAX_NETWORK_POINTS).max(1);
    let points = layers
        .chunks(bucket)
        .map(|chunk| {
            // The worst layer stands for its bucket; the strictest tolerance in it is drawn,
            // so a bucket that crosses its line still shows as crossing.
            let worst = chunk
                .iter()
                .max_by(|a, b| {
                    severity(a.cmp.rel_to_range).total_cmp(&severity(b.cmp.rel_to_range))
                })
                .expect("chunks are never empty");
            let fails = chunk.iter().any(|l| !l.cmp.pass);
            NetworkPoint {
                x: chunk[0].index as f64,
                error: worst.cmp.rel_to_range,
                tolerance: chunk
                    .iter()
                    .filter_map(|l| tolerance_rel_to_range(&l.cmp))
                    .min_by(f64::total_cmp),
                fails,
                inherited: fails
                    && chunk.iter().all(|l| {
                        l.cmp.pass
                            || matches!(
                                l.status(),
                                LayerStatus::Inherited | LayerStatus::Accumulated
                            )
                    }),
                isolated: chunk
                    .iter()
                    .filter_map(|l| l.isolated.as_ref().map(|i| i.rel_to_range))
                    .max_by(|a, b| severity(*a).total_cmp(&severity(*b))),
                isolated_fails: chunk
                    .iter()
                    .any(|l| l.isolated.as_ref().is_some_and(|i| !i.pass)),
            }
        })
        .collect();
    (points, bucket)
}

/// Decade bounds of the log axis that hold every finite positive value and the tolerances.
fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if hi == 0.0 {
        return (1e-8, 1.0);
    }
    let lo = 10f64.powf(lo.max(FLOOR).log10().floor());
    let hi = 10f64.powf(hi.log10().ceil()).max(lo * 100.0);
    (lo, hi)
}

/// Height of the legend strip above the network chart, drawn only with the isolated curve.
const LEGEND_HEIGHT: u32 = 26;

/// What every part of the network chart is placed against: the log axis's decade bounds, the
/// number of layers along x, and how many layers each point stands for.
#[derive(Clone, Copy)]
struct NetworkAxes {
    lo: f64,
    hi: f64,
    n: f64,
    bucket: usize,
}

/// Error relative to range of every paired layer in execution order, on a log axis, with each
/// layer's tolerance as a line, failing layers in red and the first divergence marked. Where
/// isolation ran, each layer's error in isolation is a second, dashed curve on the same axis,
/// with a legend above the plot (not over it, where it would hide layers).
/// Returns the SVG and how many layers each point stands for.
pub fn error_along_network(
    layers: &[LayerResult],
    first_divergence: Option<(usize, &str)>,
) -> Result<(String, usize)> {
    let (points, bucket) = network_points(layers);
    let isolated = points.iter().any(|p| p.isolated.is_some());
    let (lo, hi) = log_bounds(points.iter().flat_map(|p| {
        [
            p.error,
            p.tolerance.unwrap_or(0.0),
            p.isolated.unwrap_or(0.0),
        ]
    }));
    let axes = NetworkAxes {
        lo,
        hi,
        n: layers.len().max(1) as f64,
        bucket,
    };
    let size = if isolated {
        (1300, 360 + LEGEND_HEIGHT)
    } else {
        (1300, 360)
    };
    let chart_svg = svg(size, |root| {
        let plot = network_plot_area(root, isolated)?;
        let mut chart = network_chart(&plot, axes)?;
        // Drawn back to front: the tolerance, the isolated curve, then the accumulated curve
        // and the first divergence on top.
        tolerance_line(&mut chart, &points, axes)?;
        if isolated {
            isolated_curve(&mut chart, &points, (lo, hi))?;
        }
        accumulated_curve(&mut chart, &points, hi)?;
        if let Some(divergence) = first_divergence {
            first_divergence_marker(&mut chart, layers, divergence, axes)?;
        }
        Ok(())
    })?;
    Ok((chart_svg, bucket))
}

type NetworkChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::combinators::LogCoord<f64>,
    >,
>;

/// The area the network chart's plot takes: all of `root`, or what the legend strip leaves
/// below it when the isolated curve needs a legend (drawn here, first).
fn network_plot_area<'b>(
    root: &DrawingArea<SVGBackend<'b>, Shift>,
    isolated: bool,
) -> Result<DrawingArea<SVGBackend<'b>, Shift>> {
    if !isolated {
        return Ok(root.clone());
    }
    let (legend, plot) = root.split_vertically(LEGEND_HEIGHT);
    network_legend(&legend)?;
    Ok(plot)
}

/// The network chart's axes and grid: layers along x, error relative to range on the log y
/// axis.
fn network_chart<'a, 'b>(
    plot: &'a DrawingArea<SVGBackend<'b>, Shift>,
    NetworkAxes { lo, hi, n, .. }: NetworkAxes,
) -> Result<NetworkChart<'a, 'b>> {
    let mut chart = ChartBuilder::on(plot)
        .margin(12)
        .margin_right(24)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..n - 0.5, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .axis_style(INK)
        .x_desc("layer (execution order)")
        .y_desc("max |ONNX - ref| / max |ref|")
        .label_style((FONT, 12).into_font().color(&INK))
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// Each point's tolerance as a step line, a point's width per step, broken where a layer has
/// none (a reference of all zeros) rather than drawn to the floor.
fn tolerance_line(
    chart: &mut NetworkChart,
    points: &[NetworkPoint],
    NetworkAxes { lo, hi, bucket, .. }: NetworkAxes,
) -> Result<()> {
    let mut run: Vec<(f64, f64)> = Vec::new();
    let mut runs = Vec::new();
    for p in points {
        match p.tolerance {
            Some(t) => {
                let t = t.clamp(lo, hi);
                run.push((p.x - 0.5 * bucket as f64, t));
                run.push((p.x + 0.5 * bucket as f64, t));
            }
            None => runs.push(std::mem::take(&mut run)),
        }
    }
    runs.push(run);
    // No legend box: it would cover the first layers, where divergences often start;
    // the page's caption (or the legend strip above the plot) says what the line is.
    for r in runs.into_iter().filter(|r| !r.is_empty()) {
        chart
            .draw_series(LineSeries::new(r, TOLERANCE.stroke_width(1)))
            .map_err(err)?;
    }
    Ok(())
}

/// The accumulated error (as run) of every point: a faint line through circles, passing
/// points small and blue, failing ones larger, red, or salmon where they only inherit an
/// upstream layer's error.
fn accumulated_curve(chart: &mut NetworkChart, points: &[NetworkPoint], hi: f64) -> Result<()> {
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (p.x, on_log_axis(p.error, hi))),
            PASS.mix(0.5).stroke_width(1),
        ))
        .map_err(err)?;
    chart
        .draw_series(points.iter().map(|p| {
            let colour = match (p.fails, p.inherited) {
                (false, _) => PASS,
                (true, true) => INHERITED,
                (true, false) => FAIL,
            };
            let r = if p.fails { 3 } else { 2 };
            Circle::new((p.x, on_log_axis(p.error, hi)), r, colour.filled())
        }))
        .map_err(err)?;
    Ok(())
}

/// The first divergence: a dashed red line across the plot at its layer, a ring around the
/// layer's own error (not its bucket's worst), and a label naming it.
fn first_divergence_marker(
    chart: &mut NetworkChart,
    layers: &[LayerResult],
    (index, label): (usize, &str),
    axes: NetworkAxes,
) -> Result<()> {
    let NetworkAxes { lo, hi, .. } = axes;
    let x = index as f64;
    chart
        .draw_series(DashedLineSeries::new(
            [(x, lo), (x, hi)],
            5,
            4,
            FAIL.stroke_width(1),
        ))
        .map_err(err)?;
    let at = layers
        .get(index)
        .map(|l| on_log_axis(l.cmp.rel_to_range, hi));
    if let Some(y) = at {
        chart
            .draw_series([Circle::new((x, y), 6, FAIL.stroke_width(2))])
            .map_err(err)?;
    }
    first_divergence_label(chart, index, label, axes)
}

/// "first divergence: #index label" near the top of the plot, on whichever side of the
/// layer's line has room, so it does not run off the chart.
fn first_divergence_label(
    chart: &mut NetworkChart,
    index: usize,
    label: &str,
    NetworkAxes { hi, n, .. }: NetworkAxes,
) -> Result<()> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let x = index as f64;
    let right_half = x > n / 2.0;
    let anchor = Pos::new(if right_half { HPos::Right } else { HPos::Left }, VPos::Top);
    let style = TextStyle::from((FONT, 13).into_font())
        .color(&FAIL)
        .pos(anchor);
    let dx = if right_half { -0.01 * n } else { 0.01 * n };
    chart
        .draw_series([Text::new(
            format!("first divergence: #{index} {label}"),
            (x + dx, hi / 1.6),
            style,
        )])
        .map_err(err)?;
    Ok(())
}

/// The isolated error of every point as a dashed curve through small triangles, large where a
/// layer fails on its own. An isolated error of 0 (the layer's computation is exact when fed
/// PyTorch's values: a ReLU, a reshape) has no place on a log axis and adds nothing, so it
/// gets no point and the curve goes on past it; without that every exact layer between two
/// Linear layers would pull the curve to the floor and back. The curve is broken where
/// isolation measured no layer of a point.
fn isolated_curve(
    chart: &mut NetworkChart,
    points: &[NetworkPoint],
    (lo, hi): (f64, f64),
) -> Result<()> {
    let y = |v: f64| {
        if v.is_nan() || v.is_infinite() {
            hi
        } else {
            v.clamp(lo, hi)
        }
    };
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    let mut marks = Vec::new();
    for p in points {
        match p.isolated {
            Some(0.0) => {}
            Some(v) => {
                runs.last_mut().expect("never empty").push((p.x, y(v)));
                marks.push(((p.x, y(v)), p.isolated_fails));
            }
            None => runs.push(Vec::new()),
        }
    }
    for run in runs.into_iter().filter(|r| r.len() > 1) {
        chart
            .draw_series(DashedLineSeries::new(run, 6, 4, ISOLATED.stroke_width(2)))
            .map_err(err)?;
    }
    // Triangles, not circles: the accumulated curve's points are the circles.
    chart
        .draw_series(marks.into_iter().map(|(at, fails)| {
            if fails {
                TriangleMarker::new(at, 6, ISOLATED.filled())
            } else {
                TriangleMarker::new(at, 3, ISOLATED.mix(0.8).filled())
            }
        }))
        .map_err(err)?;
    Ok(())
}

/// The lines the network chart's legend shows a sample of.
#[derive(Clone, Copy)]
enum LegendSample {
    Accumulated,
    Isolated,
    Tolerance,
}

/// The legend strip of the network chart: a sample of each line and what it is.
fn network_legend(area: &DrawingArea<SVGBackend, Shift>) -> Result<()> {
    let y = LEGEND_HEIGHT as i32 / 2 + 2;
    let text = TextStyle::from((FONT, 12).into_font()).color(&INK).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Left,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    // Left edge of the plot: the chart's margin plus its y label area.
    let mut x = 76;
    for (sample, label) in [
        (LegendSample::Accumulated, "error (accumulated, as run)"),
        (
            LegendSample::Isolated,
            "error in isolation (its own ONNX computation fed PyTorch's values; large ▲: fails on its own)",
        ),
        (LegendSample::Tolerance, "tolerance"),
    ] {
        legend_sample(area, sample, (x, y))?;
        area.draw(&Text::new(label, (x + 34, y), text.clone()))
            .map_err(err)?;
        // Text width is the viewer's business; about 5.5 pixels a character at this size.
        x += 34 + label.chars().count() as i32 * 11 / 2 + 24;
    }
    Ok(())
}

/// A 26-pixel sample of one line of the network chart, drawn as the chart draws it.
fn legend_sample(
    area: &DrawingArea<SVGBackend, Shift>,
    sample: LegendSample,
    (x, y): (i32, i32),
) -> Result<()> {
    let line = |from: i32, to: i32, style: ShapeStyle| {
        area.draw(&PathElement::new(vec![(x + from, y), (x + to, y)], style))
            .map_err(err)
    };
    match sample {
        LegendSample::Accumulated => {
            line(0, 26, PASS.mix(0.5).stroke_width(1))?;
            area.draw(&Circle::new((x + 13, y), 3, PASS.filled()))
                .map_err(err)
        }
        LegendSample::Isolated => {
            for dash in [0, 10, 20] {
                line(dash, dash + 6, ISOLATED.stroke_width(2))?;
            }
            area.draw(&TriangleMarker::new((x + 13, y), 3, ISOLATED.filled()))
                .map_err(err)
        }
        LegendSample::Tolerance => line(0, 26, TOLERANCE.stroke_width(1)),
    }
}

/// The layer's log-binned histogram of |ONNX - ref| (bins as `stats::Histogram::labels`),
/// as horizontal bars on a log count axis so that a handful of bad elements still shows.
/// Bins at or above the layer's absolute tolerance are red. Empty bins at either end are
/// left out.
pub fn error_histogram(cmp: &Comparison) -> Result<String> {
    let labels = ErrorHistogram::labels();
    let edges = ErrorHistogram::edges();
    let bins = &cmp.histogram.bins;
    let first = bins.iter().position(|&c| c > 0).unwrap_or(0);
    let last = bins
        .iter()
        .rposition(|&c| c > 0)
        .unwrap_or(bins.len().saturating_sub(1));
    let shown: Vec<usize> = (first..=last.max(first))
        .filter(|&i| i < labels.len())
        .collect();
    let max = bins.iter().copied().max().unwrap_or(0).max(1) as f64;
    let tol = tolerance_abs(cmp);
    svg((380, 300), |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(10)
            .caption(
                "|ONNX - ref| per element",
                (FONT, 14).into_font().color(&INK),
            )
            .x_label_area_size(32)
            .y_label_area_size(104)
            // At least MIN_HISTOGRAM_ROWS rows, so two bins do not become two slabs.
            .build_cartesian_2d(
                (0.5..max * 3.0).log_scale(),
                (0..shown.len().max(MIN_HISTOGRAM_ROWS)).into_segmented(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .axis_style(INK)
            .x_desc("elements (log)")
            .x_labels(5)
            .y_labels(shown.len().max(MIN_HISTOGRAM_ROWS))
            .label_style((FONT, 11).into_font().color(&INK))
            .x_label_formatter(&|x| format!("{}", x.round() as u64))
            .y_label_formatter(&|y| match y {
                SegmentValue::CenterOf(i) => shown
                    .get(*i)
                    .map(|&b| labels[b].clone())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(err)?;
        chart
            .draw_series(histogram_bars(&shown, bins, &edges, tol))
            .map_err(err)?;
        chart
            .draw_series(histogram_counts(&shown, bins))
            .map_err(err)?;
        Ok(())
    })
}

/// The histogram's bars, one per non-empty bin shown (`shown[row]` is the bin of `row`):
/// red where the bin's errors reach the tolerance.
fn histogram_bars(
    shown: &[usize],
    bins: &[u64],
    edges: &[f64],
    tol: f64,
) -> Vec<Rectangle<(f64, SegmentValue<usize>)>> {
    shown
        .iter()
        .enumerate()
        .filter(|(_, &b)| bins[b] > 0)
        .map(|(row, &b)| {
            // Bin b holds errors from edges[b]; at or past the tolerance it breaks it.
            let colour = if edges[b] >= tol && b > 0 { FAIL } else { PASS };
            let mut bar = Rectangle::new(
                [
                    (0.5, SegmentValue::Exact(row)),
                    (bins[b] as f64, SegmentValue::Exact(row + 1)),
                ],
                colour.mix(0.85).filled(),
            );
            bar.set_margin(2, 2, 0, 0);
            bar
        })
        .collect()
}

/// Each bar's count, written just past its end.
fn histogram_counts(
    shown: &[usize],
    bins: &[u64],
) -> Vec<Text<'static, (f64, SegmentValue<usize>), String>> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    shown
        .iter()
        .enumerate()
        .filter(|(_, &b)| bins[b] > 0)
        .map(|(row, &b)| {
            Text::new(
                format!("{}", bins[b]),
                (bins[b] as f64 * 1.08, SegmentValue::CenterOf(row)),
                TextStyle::from((FONT, 10).into_font())
                    .color(&INK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            )
        })
        .collect()
}

/// Reference value against ONNX value for the sampled elements, with the diagonal where they
/// would be equal; elements outside the tolerance in red. Points that fall on the same pixel
/// are drawn once.
pub fn scatter(detail: &LayerDetail, cmp: &Comparison) -> Result<String> {
    let finite: Vec<(f64, f64)> = detail
        .scatter
        .iter()
        .map(|[r, t]| (*r as f64, *t as f64))
        .filter(|(r, t)| r.is_finite() && t.is_finite())
        .collect();
    let (mut lo, mut hi) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (r, t)| {
            (lo.min(*r).min(*t), hi.max(*r).max(*t))
        });
    if !lo.is_finite() || !hi.is_finite() {
        (lo, hi) = (-1.0, 1.0);
    }
    if hi - lo < 1e-12 {
        (lo, hi) = (lo - 0.5, hi + 0.5);
    }
    let pad = (hi - lo) * 0.05;
    let (lo, hi) = (lo - pad, hi + pad);
    let bound = cmp.tol.bound_for(cmp.ref_max_abs);
    let outside = |r: f64, t: f64| !bound.accepts(r, t);
    // One point per grid cell and colour; out-of-tolerance points are drawn last, on top.
    let cell = |v: f64| ((v - lo) / (hi - lo) * SCATTER_GRID) as i64;
    let mut seen = HashSet::new();
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for &(r, t) in &finite {
        let is_bad = outside(r, t);
        if seen.insert((cell(r), cell(t), is_bad)) {
            if is_bad {
                bad.push((r, t));
            } else {
                ok.push((r, t));
            }
        }
    }
    svg((380, 300), |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(10)
            .caption(
                "ONNX against reference (sampled)",
                (FONT, 14).into_font().color(&INK),
            )
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(lo..hi, lo..hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .axis_style(INK)
            .x_desc("reference (PyTorch)")
            .y_desc("ONNX Runtime")
            .x_labels(5)
            .y_labels(5)
            .label_style((FONT, 11).into_font().color(&INK))
            .x_label_formatter(&|v| tick(*v, hi - lo))
            .y_label_formatter(&|v| tick(*v, hi - lo))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                [(lo, lo), (hi, hi)],
                TOLERANCE.stroke_width(1),
            ))
            .map_err(err)?;
        chart
            .draw_series(
                ok.iter()
                    .map(|&p| Circle::new(p, 2, PASS.mix(0.6).filled())),
            )
            .map_err(err)?;
        chart
            .draw_series(bad.iter().map(|&p| Circle::new(p, 2, FAIL.filled())))
            .map_err(err)?;
        Ok(())
    })
}

/// Largest |ONNX - ref| per channel (dimension 1), with the layer's absolute tolerance as a
/// line; a broken channel stands out as one tall red bar. Wide layers are drawn as one line.
pub fn channel_errors(detail: &LayerDetail, cmp: &Comparison) -> Result<String> {
    // A non-finite error is drawn at the top of the axis, which finite errors alone set.
    let values: Vec<f64> = detail
        .channel_max_abs
        .iter()
        .map(|v| if v.is_finite() { *v } else { f64::MAX })
        .collect();
    let n = values.len();
    let tol = tolerance_abs(cmp);
    let top = values
        .iter()
        .copied()
        .filter(|v| *v < f64::MAX)
        .fold(tol, f64::max)
        .max(1e-30)
        * 1.15;
    svg((380, 300), |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(10)
            .caption(
                "largest |ONNX - ref| per channel",
                (FONT, 14).into_font().color(&INK),
            )
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .axis_style(INK)
            .x_desc("channel")
            .x_labels(n.clamp(2, 8))
            .y_labels(5)
            .label_style((FONT, 11).into_font().color(&INK))
            .x_label_formatter(&|x| format!("{}", x.round() as i64))
            .y_label_formatter(&|v| tick(*v, top))
            .draw()
            .map_err(err)?;
        if n <= MAX_CHANNEL_BARS {
            chart
                .draw_series(channel_bars(&values, tol, top))
                .map_err(err)?;
        } else {
            chart
                .draw_series(LineSeries::new(
                    values
                        .iter()
                        .enumerate()
                        .map(|(c, &v)| (c as f64, v.min(top))),
                    PASS.stroke_width(1),
                ))
                .map_err(err)?;
            // Only the channels past the tolerance get a marker, so the count stays small
            // unless everything is broken, and then a marker per channel says just that.
            chart
                .draw_series(
                    values
                        .iter()
                        .enumerate()
                        .filter(|(_, &v)| v > tol)
                        .take(MAX_CHANNEL_BARS)
                        .map(|(c, &v)| Circle::new((c as f64, v.min(top)), 2, FAIL.filled())),
                )
                .map_err(err)?;
        }
        chart
            .draw_series(DashedLineSeries::new(
                [(-0.5, tol), (n as f64 - 0.5, tol)],
                6,
                4,
                TOLERANCE.stroke_width(1),
            ))
            .map_err(err)?;
        Ok(())
    })
}

/// One bar per channel, red past the tolerance, cut at the top of the axis.
fn channel_bars(values: &[f64], tol: f64, top: f64) -> Vec<Rectangle<(f64, f64)>> {
    values
        .iter()
        .enumerate()
        .map(|(c, &v)| {
            let colour = if v > tol { FAIL } else { PASS };
            Rectangle::new(
                [(c as f64 - 0.4, 0.0), (c as f64 + 0.4, v.min(top))],
                colour.mix(0.85).filled(),
            )
        })
        .collect()
}

/// An axis number on an axis spanning `span`, short enough for a small chart. A tick that
/// is zero up to rounding (`-5.6e-17`) is written as 0.
fn tick(v: f64, span: f64) -> String {
    let a = v.abs();
    if v == 0.0 || a < span.abs() * 1e-9 {
        "0".into()
    } else if (1e-2..1e4).contains(&a) {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_bounds_cover_values_in_whole_decades() {
        let (lo, hi) = log_bounds([3e-7, 2e-2, 0.0, f64::INFINITY].into_iter());
        assert!((lo / 1e-7 - 1.0).abs() < 1e-9 && (hi / 1e-1 - 1.0).abs() < 1e-9);
        assert_eq!(log_bounds([0.0].into_iter()), (1e-8, 1.0));
    }

    #[test]
    fn short_numbers() {
        assert_eq!(tick(0.5, 1.0), "0.5");
        assert_eq!(tick(12.0, 1.0), "12");
        assert_eq!(tick(3e-5, 1e-4), "3.0e-5");
        assert_eq!(tick(-5.6e-17, 1.0), "0");
    }
}
