//! The plots, as SVG: per record TFLOP/s against sequence length and our speedup per case; per
//! problem of the history its median across runs.

use super::model::{history_problems, record_plots, series_name, timing, CaseRow, HistoryProblem, PlotKind, OURS};
use super::{Exporter, Sources};
use crate::stores::history::{Row, ROLE_OURS};
use crate::stores::record::{is_control, ResultRecord};
use crate::verdicts::regression::REGRESSION_TOLERANCE;
use crate::verdicts::stats::quantile;
use anyhow::anyhow;
use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Every plot of the records, then of the history's problems.
pub struct Svg;

impl Exporter for Svg {
    fn export(&self, sources: &Sources) -> anyhow::Result<Vec<(String, String)>> {
        let mut files = Vec::new();
        for named in sources.records {
            for plot in record_plots(named) {
                let svg = match &plot.kind {
                    PlotKind::Tflops(cases) => tflops_svg(&plot.title, cases)?,
                    PlotKind::Speedup(rows) => speedup_svg(&plot.title, rows)?,
                };
                files.push((plot.file, svg));
            }
        }
        for problem in history_problems(sources.history.unwrap_or_default()) {
            files.push((problem.file.clone(), history_svg(&problem)?));
        }
        Ok(files)
    }
}

const PLOT_WIDTH: u32 = 900;
const PLOT_HEIGHT: u32 = 560;
/// Height per bar of the speedup chart, plus room for its caption and axis.
const BAR_ROW_PX: u32 = 22;
const BAR_CHART_CHROME_PX: u32 = 140;
const FONT: &str = "sans-serif";
const CAPTION_PX: u32 = 20;
const LABEL_PX: u32 = 14;
const OURS_COLOR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
/// Further series of ours (another kernel family in one history plot): Tableau's cyan and
/// olive, which no peer uses.
const MORE_OURS_COLORS: [RGBColor; 2] = [RGBColor(0x17, 0xbe, 0xcf), RGBColor(0xbc, 0xbd, 0x22)];
/// Peers in order; Tableau's categorical palette after its first (ours') colour.
const PEER_COLORS: [RGBColor; 6] = [
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];
pub const FASTER_COLOR: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
pub const SLOWER_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// Headroom above the highest point so the legend and top marker stay clear of the frame.
const Y_HEADROOM: f64 = 1.15;

fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the plot: {e}")
}

/// One curve: a name (its legend entry), its colour and its (x, y) points.
type Series = (String, RGBColor, Vec<(f64, f64)>);

/// Series ready to draw, one per name: the points of equal names merged and sorted by x,
/// empty ones dropped (a legend entry names something drawn, once), ours first in
/// [`OURS_COLOR`] (then [`MORE_OURS_COLORS`]) and the others in first-seen order through
/// [`PEER_COLORS`].
fn legend_series(series: Vec<(String, Vec<(f64, f64)>)>) -> Vec<Series> {
    let mut merged: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (name, points) in series {
        match merged.iter_mut().find(|(n, _)| *n == name) {
            Some((_, all)) => all.extend(points),
            None => merged.push((name, points)),
        }
    }
    merged.retain(|(_, points)| !points.is_empty());
    merged.sort_by_key(|(name, _)| !name.starts_with(OURS));
    let ours = merged.iter().filter(|(name, _)| name.starts_with(OURS)).count();
    merged
        .into_iter()
        .enumerate()
        .map(|(i, (name, mut points))| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let color = match i.checked_sub(1) {
                None => OURS_COLOR,
                Some(j) if i < ours => MORE_OURS_COLORS[j % MORE_OURS_COLORS.len()],
                Some(_) => PEER_COLORS[(i - ours) % PEER_COLORS.len()],
            };
            (name, color, points)
        })
        .collect()
}

/// A line chart of f64 points on an SVG.
type LineChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws each series as a line with dots, then the legend of everything labelled so far (one
/// entry per series) in the upper left corner.
fn draw_lines_with_legend<'a>(chart: &mut LineChart<'a, 'a>, series: Vec<Series>) -> anyhow::Result<()> {
    for (name, color, points) in series {
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(plot_err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, LABEL_PX))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

/// Room above the highest whisker per legend entry, as a fraction of it: an entry is about 20
/// of the plot's 450 pixels, so the legend sits above the data instead of on it.
const LEGEND_ENTRY_ROOM: f64 = 0.06;
/// At most this many runs are named on the x axis (a label is about 100 of 900 pixels).
const MAX_X_LABELS: usize = 8;

/// TFLOP/s against sequence length of ours and each peer, for the cases of one (dtype, head
/// dim, mask). The x axis is log₂ of the length so that a 512…16384 sweep is evenly spaced and
/// ticks land on the lengths themselves.
fn tflops_svg(title: &str, cases: &[&ResultRecord]) -> anyhow::Result<String> {
    let mut points = Vec::new();
    for r in cases {
        let x = (r.case.sq as f64).log2();
        let named = std::iter::once((OURS, &r.ours)).chain(r.peers.iter().map(|p| (p.name.as_str(), p)));
        for (name, m) in named {
            if let Some(t) = timing(m, &r.case) {
                points.push((name.to_string(), vec![(x, t.tflops)]));
            }
        }
    }
    let series = legend_series(points);
    let points = || series.iter().flat_map(|s| s.2.iter().copied());
    let x_lo = points().map(|p| p.0).fold(f64::INFINITY, f64::min).floor();
    let x_hi = points().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max).ceil();
    let y_hi = points().map(|p| p.1).fold(0.0, f64::max) * Y_HEADROOM;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, PLOT_HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, CAPTION_PX))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(x_lo - 0.25..x_hi + 0.25, 0.0..y_hi.max(1.0))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("sequence length (tokens, log scale)")
            .y_desc("TFLOP/s (median)")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_labels((x_hi - x_lo) as usize + 1)
            // Ticks between powers of two would name lengths that were not measured.
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-9 {
                    format!("{}", x.exp2().round() as u64)
                } else {
                    String::new()
                }
            })
            .label_style((FONT, LABEL_PX))
            .axis_desc_style((FONT, LABEL_PX + 1))
            .draw()
            .map_err(plot_err)?;
        draw_lines_with_legend(&mut chart, series)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Our speedup over the best non-control peer per case, one horizontal bar each, with the
/// parity line at 1.0: green bars are faster than every peer, red ones slower.
pub fn speedup_svg(title: &str, rows: &[CaseRow]) -> anyhow::Result<String> {
    let bars: Vec<(String, f64)> =
        rows.iter().filter_map(|r| r.speedup.map(|s| (format!("{} {} {}", r.shape, r.dtype, r.mask), s))).collect();
    bars_svg(
        title,
        "speedup over the best peer (peer median / our median)",
        "case (B×H×S×D dtype mask)",
        &bars,
        [("ours faster (≥ 1)", FASTER_COLOR), ("ours slower (< 1)", SLOWER_COLOR)],
    )
}

/// Horizontal bars of ratios, the first bar on top, with a line at 1: coloured and named in
/// the legend by `sides`, those at or above 1 first, then those below.
pub fn bars_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    bars: &[(String, f64)],
    sides: [(&str, RGBColor); 2],
) -> anyhow::Result<String> {
    // The y axis counts upwards: reversed, the first bar is the top one.
    let bars: Vec<&(String, f64)> = bars.iter().rev().collect();
    let n = bars.len() as i32;
    let x_hi = bars.iter().map(|b| b.1).fold(1.0, f64::max) * Y_HEADROOM;
    let height = BAR_CHART_CHROME_PX + BAR_ROW_PX * bars.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, CAPTION_PX))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(250)
            .build_cartesian_2d(0.0..x_hi, (0..n).into_segmented())
            .map_err(plot_err)?;
        let label = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => bars.get(*i as usize).map_or(String::new(), |b| b.0.clone()),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .y_labels(bars.len())
            .y_label_formatter(&label)
            .label_style((FONT, LABEL_PX))
            .axis_desc_style((FONT, LABEL_PX + 1))
            .draw()
            .map_err(plot_err)?;
        for (above, (name, color)) in [true, false].into_iter().zip(sides) {
            // A legend entry for a colour no bar has would only repeat the other one.
            if !bars.iter().any(|b| (b.1 >= 1.0) == above) {
                continue;
            }
            chart
                .draw_series(bars.iter().enumerate().filter(|(_, b)| (b.1 >= 1.0) == above).map(|(i, b)| {
                    let i = i as i32;
                    let mut bar = Rectangle::new(
                        [(0.0, SegmentValue::Exact(i)), (b.1, SegmentValue::Exact(i + 1))],
                        color.mix(0.8).filled(),
                    );
                    bar.set_margin(3, 3, 0, 0);
                    bar
                }))
                .map_err(plot_err)?
                .label(name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.mix(0.8).filled()));
        }
        chart
            .draw_series(LineSeries::new(
                [(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Last)],
                BLACK.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label("parity (1.0)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, LABEL_PX))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// The median across runs of one problem: its rows, oldest first, at the x positions of its runs.
fn history_svg(problem: &HistoryProblem) -> anyhow::Result<String> {
    let (key, rows, runs) = (&problem.key, &problem.rows, &problem.runs);
    let x_of = |row: &Row| runs.iter().position(|(date, _)| *date == row.date_utc).unwrap_or(0) as f64;
    let drawn: Vec<&Row> = rows.iter().copied().filter(|r| !is_control(&r.kernel)).collect();
    // One series (and one legend entry) per name, however many runs it has.
    let series = legend_series(drawn.iter().map(|r| (series_name(r), vec![(x_of(r), r.median_us)])).collect());
    let color_of = |name: &str| series.iter().find(|s| s.0 == name).map_or(BLACK, |s| s.1);
    let whiskers: Vec<(f64, f64, f64, RGBColor)> = drawn
        .iter()
        .map(|r| {
            let mut sorted = r.samples_us.clone();
            sorted.sort_by(f64::total_cmp);
            (x_of(r), quantile(&sorted, 0.1), quantile(&sorted, 0.9), color_of(&series_name(r)))
        })
        .collect();
    let best = rows.iter().filter(|r| r.role == ROLE_OURS && r.correct == Some(true)).map(|r| r.median_us);
    let threshold = best.fold(f64::INFINITY, f64::min) * (1.0 + REGRESSION_TOLERANCE);
    let top = whiskers.iter().map(|w| w.2).fold(if threshold.is_finite() { threshold } else { 0.0 }, f64::max);
    let y_hi = top * (1.0 + LEGEND_ENTRY_ROOM * (series.len() + 2) as f64);
    let x_hi = runs.len() as f64 - 0.5;
    let title = format!(
        "{} {} {} {}: median per run ({}, {} mode)",
        key.shape, key.dtype, key.causal, key.layout, key.gpu, key.mode
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, PLOT_HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, LABEL_PX + 2))
            .margin(12)
            .x_label_area_size(56)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5..x_hi, 0.0..y_hi.max(1.0))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("run (commit, day), oldest first")
            .y_desc("median µs (lower is faster); bars p10–p90")
            .x_labels(runs.len().min(MAX_X_LABELS))
            .y_label_formatter(&|y| format!("{y:.0}"))
            // Only whole positions are runs.
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-9 && i >= 0.0 {
                    runs.get(i as usize).map_or(String::new(), |r| r.1.clone())
                } else {
                    String::new()
                }
            })
            .disable_x_mesh()
            .label_style((FONT, LABEL_PX))
            .axis_desc_style((FONT, LABEL_PX + 1))
            .draw()
            .map_err(plot_err)?;
        for (x, lo, hi, color) in whiskers {
            chart.draw_series([PathElement::new(vec![(x, lo), (x, hi)], color.mix(0.6))]).map_err(plot_err)?;
        }
        if threshold.is_finite() {
            chart
                .draw_series(LineSeries::new([(-0.5, threshold), (x_hi, threshold)], SLOWER_COLOR.stroke_width(1)))
                .map_err(plot_err)?
                .label(format!("regression line: best of ours + {:.0}%", 100.0 * REGRESSION_TOLERANCE))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], SLOWER_COLOR.stroke_width(1)));
        }
        draw_lines_with_legend(&mut chart, series)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::super::model::case_row;
    use super::super::tests::record;
    use super::*;

    #[test]
    fn legend_series_are_one_per_name_ours_first_and_never_empty() {
        let series = legend_series(vec![
            ("sdpa-flash".into(), vec![(2.0, 1.0)]),
            ("ours".into(), vec![(3.0, 5.0)]),
            ("sdpa-flash".into(), vec![(1.0, 2.0)]),
            ("fa4".into(), vec![]),
            ("ours".into(), vec![(1.0, 4.0)]),
        ]);
        let names: Vec<&str> = series.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["ours", "sdpa-flash"]);
        assert_eq!(series[0].1, OURS_COLOR);
        assert_eq!(series[0].2, [(1.0, 4.0), (3.0, 5.0)], "merged and sorted by x");
        assert_eq!(series[1].1, PEER_COLORS[0]);
    }

    #[test]
    fn the_speedup_legend_names_only_colours_that_are_drawn() {
        let named = record();
        let rows: Vec<CaseRow> = named
            .record
            .results
            .iter()
            .map(|r| case_row(r, &named.record.env))
            .filter(|r| r.speedup < Some(1.0))
            .collect();
        let svg = speedup_svg("slower only", &rows).unwrap();
        assert!(svg.contains("ours slower") && !svg.contains("ours faster"), "{svg}");
        let plots = Svg.export(&Sources { records: &[record()], history: None }).unwrap();
        let lines = &plots[0].1;
        for name in ["ours", "sdpa-flash", "sdpa-cudnn", "self"] {
            assert_eq!(lines.matches(&format!(">\n{name}\n<")).count(), 1, "{name}");
        }
    }
}
