//! The benchmark report: bench records → Markdown tables, a CSV of every measurement and SVG
//! plots. Pure: no files, no GPU; `cmd_report` reads the records and writes the outputs.

use crate::stores::record::{is_control, BenchRecord, CaseRecord, Measurement, ResultRecord};
use crate::verdicts::stats::{summarize, Verdict};
use anyhow::anyhow;
use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One record with the name it is reported under (its file stem).
pub struct NamedRecord {
    pub name: String,
    pub record: BenchRecord,
}

/// Everything the report writes: file name → contents.
pub struct Report {
    pub markdown: String,
    pub csv: String,
    pub plots: Vec<(String, String)>,
}

/// Median, p10 and p90 in µs and the TFLOP/s of the median, of one implementation on one case.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    pub tflops: f64,
}

fn timing(m: &Measurement, case: &CaseRecord) -> Option<Timing> {
    if !m.is_ok() {
        return None;
    }
    let s = summarize(&m.samples_us)?;
    Some(Timing { median_us: s.median, p10_us: s.p10, p90_us: s.p90, tflops: tflops(case.flops, s.median) })
}

/// FLOPs over µs, in TFLOP/s (1 FLOP/µs = 10⁶ FLOP/s).
fn tflops(flops: f64, us: f64) -> f64 {
    flops / us / 1e6
}

/// One table row: our kernel against every peer on one case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseRow {
    pub shape: String,
    pub dtype: String,
    pub mask: String,
    pub kernel: String,
    pub ours: Option<Timing>,
    /// Every peer in the record's order, `None` when it did not run (refused, missing).
    pub peers: Vec<(String, Option<Timing>)>,
    /// The fastest non-control peer that ran, and our speedup over it (its median / ours).
    pub best_peer: Option<String>,
    pub speedup: Option<f64>,
    pub verdict: Option<Verdict>,
}

/// `B×H×S×D`, with the KV heads and key length spelled out only when they differ.
pub fn shape_label(c: &CaseRecord) -> String {
    let heads = if c.hkv == c.h { c.h.to_string() } else { format!("{}/{}", c.h, c.hkv) };
    let seq = if c.sk == c.sq { c.sq.to_string() } else { format!("{}:{}", c.sq, c.sk) };
    format!("{}×{heads}×{seq}×{}", c.b, c.d)
}

pub fn case_row(r: &ResultRecord) -> CaseRow {
    let ours = timing(&r.ours, &r.case);
    let peers: Vec<(String, Option<Timing>)> = r.peers.iter().map(|p| (p.name.clone(), timing(p, &r.case))).collect();
    let best = peers
        .iter()
        .filter(|(name, _)| !is_control(name))
        .filter_map(|(name, t)| t.map(|t| (name.clone(), t.median_us)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let speedup = match (ours, &best) {
        (Some(o), Some((_, peer_us))) => Some(peer_us / o.median_us),
        _ => None,
    };
    CaseRow {
        shape: shape_label(&r.case),
        dtype: r.case.dtype.clone(),
        mask: r.case.causal.clone(),
        kernel: r.ours.name.clone(),
        ours,
        peers,
        best_peer: best.map(|(name, _)| name),
        speedup,
        verdict: speedup.map(Verdict::from_speedup),
    }
}

/// Geometric mean; `None` for no values.
pub fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// Peer names of a record in first-seen order.
fn peer_names(record: &BenchRecord) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in record.results.iter().flat_map(|r| &r.peers) {
        if !names.contains(&p.name) {
            names.push(p.name.clone());
        }
    }
    names
}

fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "—".into())
}

fn markdown_record(out: &mut String, named: &NamedRecord, plots: &[String]) {
    let env = &named.record.env;
    let rows: Vec<CaseRow> = named.record.results.iter().map(case_row).collect();
    let peers = peer_names(&named.record);
    let _ = writeln!(out, "## {}\n", named.name);
    let _ = writeln!(
        out,
        "GPU {} (sm {}), {}, commit {}, mode {}, {} samples per implementation, evoattn {}.\n",
        env.gpu,
        env.compute_capability,
        env.date_utc,
        env.git_commit.as_deref().unwrap_or("unrecorded"),
        env.mode.map_or("unrecorded", |m| m.name()),
        env.samples,
        env.evoattn_version,
    );
    let peer_cols: String = peers.iter().map(|p| format!(" {p} µs |")).collect();
    let _ = writeln!(
        out,
        "| shape B×H×S×D | dtype | mask | our kernel | ours µs | ours TFLOP/s |{peer_cols} best peer | speedup | verdict |"
    );
    let _ = writeln!(out, "|{}", "---|".repeat(9 + peers.len()));
    for row in &rows {
        let peer_cells: String = peers
            .iter()
            .map(|name| {
                let t = row.peers.iter().find(|(n, _)| n == name).and_then(|(_, t)| *t);
                format!(" {} |", or_dash(t.map(|t| format!("{:.1}", t.median_us))))
            })
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | `{}` | {} | {} |{peer_cells} {} | {} | {} |",
            row.shape,
            row.dtype,
            row.mask,
            row.kernel,
            or_dash(row.ours.map(|t| format!("{:.1}", t.median_us))),
            or_dash(row.ours.map(|t| format!("{:.1}", t.tflops))),
            or_dash(row.best_peer.clone()),
            or_dash(row.speedup.map(|s| format!("{s:.3}×"))),
            or_dash(row.verdict.map(|v| v.name().to_string())),
        );
    }
    let speedups: Vec<f64> = rows.iter().filter_map(|r| r.speedup).collect();
    let worst =
        rows.iter().filter(|r| r.speedup.is_some()).min_by(|a, b| a.speedup.unwrap().total_cmp(&b.speedup.unwrap()));
    match (geomean(&speedups), worst) {
        (Some(g), Some(w)) => {
            let _ = writeln!(
                out,
                "\nGeometric-mean speedup over the best peer: **{g:.3}×** ({}) over {} cases; worst case {} {} mask {}: {:.3}× against {}.\n",
                Verdict::from_speedup(g).name(),
                speedups.len(),
                w.shape,
                w.dtype,
                w.mask,
                w.speedup.unwrap(),
                or_dash(w.best_peer.clone()),
            );
        }
        _ => out.push_str("\nNo case has both our time and a peer's: no speedup.\n\n"),
    }
    for plot in plots {
        let _ = writeln!(out, "![{plot}]({plot})\n");
    }
}

const CSV_HEADER: &str =
    "record,b,h,hkv,sq,sk,d,dtype,causal,layout,implementation,role,status,n,median_us,p10_us,p90_us,tflops";

/// One row per (record, case, implementation), ours first; the numbers are empty where the
/// implementation did not run.
pub fn csv(records: &[NamedRecord]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for named in records {
        for r in &named.record.results {
            let c = &r.case;
            let measurements = std::iter::once(("ours", &r.ours)).chain(r.peers.iter().map(|p| ("peer", p)));
            for (role, m) in measurements {
                let numbers = match timing(m, c) {
                    Some(t) => format!(
                        "{},{:.3},{:.3},{:.3},{:.2}",
                        m.samples_us.len(),
                        t.median_us,
                        t.p10_us,
                        t.p90_us,
                        t.tflops
                    ),
                    None => format!("{},,,,", m.samples_us.len()),
                };
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{role},{},{numbers}",
                    named.name, c.b, c.h, c.hkv, c.sq, c.sk, c.d, c.dtype, c.causal, c.layout, m.name, m.status
                );
            }
        }
    }
    out
}

pub const PLOT_WIDTH: u32 = 900;
pub const PLOT_HEIGHT: u32 = 560;
/// Height per bar of the speedup chart, plus room for its caption and axis.
const BAR_ROW_PX: u32 = 22;
const BAR_CHART_CHROME_PX: u32 = 140;
pub const FONT: &str = "sans-serif";
const CAPTION_PX: u32 = 20;
pub const LABEL_PX: u32 = 14;
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
const FASTER_COLOR: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
pub const SLOWER_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// Headroom above the highest point so the legend and top marker stay clear of the frame.
const Y_HEADROOM: f64 = 1.15;

pub fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the plot: {e}")
}

/// One curve: a name (its legend entry), its colour and its (x, y) points.
pub type Series = (String, RGBColor, Vec<(f64, f64)>);

/// Series ready to draw, one per name: the points of equal names merged and sorted by x,
/// empty ones dropped (a legend entry names something drawn, once), ours first in
/// [`OURS_COLOR`] (then [`MORE_OURS_COLORS`]) and the others in first-seen order through
/// [`PEER_COLORS`].
pub fn legend_series(series: Vec<(String, Vec<(f64, f64)>)>) -> Vec<Series> {
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
pub type LineChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws each series as a line with dots, then the legend of everything labelled so far (one
/// entry per series) in the upper left corner.
pub fn draw_lines_with_legend<'a>(chart: &mut LineChart<'a, 'a>, series: Vec<Series>) -> anyhow::Result<()> {
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

/// The name of our kernel's series (the history's are `ours (<family>)`).
pub const OURS: &str = "ours";

/// TFLOP/s against sequence length of ours and each peer, for the cases of one (dtype, head
/// dim, mask). The x axis is log₂ of the length so that a 512…16384 sweep is evenly spaced and
/// ticks land on the lengths themselves.
pub fn tflops_svg(title: &str, cases: &[&ResultRecord]) -> anyhow::Result<String> {
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
    // The y axis counts upwards: reversed, the first case is the top bar.
    let bars: Vec<(String, f64)> = rows
        .iter()
        .rev()
        .filter_map(|r| r.speedup.map(|s| (format!("{} {} {}", r.shape, r.dtype, r.mask), s)))
        .collect();
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
            .x_desc("speedup over the best peer (peer median / our median)")
            .y_desc("case (B×H×S×D dtype mask)")
            .y_labels(bars.len())
            .y_label_formatter(&label)
            .label_style((FONT, LABEL_PX))
            .axis_desc_style((FONT, LABEL_PX + 1))
            .draw()
            .map_err(plot_err)?;
        for (faster, color, name) in
            [(true, FASTER_COLOR, "ours faster (≥ 1)"), (false, SLOWER_COLOR, "ours slower (< 1)")]
        {
            // A legend entry for a colour no bar has would only repeat the other one.
            if !bars.iter().any(|b| (b.1 >= 1.0) == faster) {
                continue;
            }
            chart
                .draw_series(bars.iter().enumerate().filter(|(_, b)| (b.1 >= 1.0) == faster).map(|(i, b)| {
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

/// Builds the whole report. TFLOP/s plots are drawn only for (dtype, head dim, mask) groups
/// whose cases are a sequence-length sweep (every length distinct, at least two): other grids,
/// such as batch sweeps at one length, have no curve to draw and are covered by the bars.
pub fn build(records: &[NamedRecord]) -> anyhow::Result<Report> {
    let mut markdown = String::from("# evoattn benchmark report\n\n");
    markdown.push_str(
        "Times are medians of the raw samples in µs; speedup is the best non-control peer's median over ours \
         (above 1 we are faster); verdicts: excellent ≥ 1.5×, good ≥ 1.1×, modest ≥ 1.02×, parity ±2%, regression below.\n\n",
    );
    let mut plots = Vec::new();
    for named in records {
        let mut groups: BTreeMap<(String, usize, String), Vec<&ResultRecord>> = BTreeMap::new();
        for r in &named.record.results {
            groups.entry((r.case.dtype.clone(), r.case.d, r.case.causal.clone())).or_default().push(r);
        }
        let mut names = Vec::new();
        for ((dtype, d, mask), cases) in &groups {
            let mut lengths: Vec<usize> = cases.iter().map(|r| r.case.sq).collect();
            lengths.sort_unstable();
            lengths.dedup();
            if lengths.len() < 2 || lengths.len() != cases.len() {
                continue;
            }
            let file = format!("{}-tflops-{dtype}-d{d}-{mask}.svg", named.name);
            let title = format!("{}: {dtype}, head dim {d}, mask {mask}", named.name);
            plots.push((file.clone(), tflops_svg(&title, cases)?));
            names.push(file);
        }
        let rows: Vec<CaseRow> = named.record.results.iter().map(case_row).collect();
        if rows.iter().any(|r| r.speedup.is_some()) {
            let file = format!("{}-speedup.svg", named.name);
            plots.push((file.clone(), speedup_svg(&format!("{}: speedup per case", named.name), &rows)?));
            names.push(file);
        }
        markdown_record(&mut markdown, named, &names);
    }
    Ok(Report { markdown, csv: csv(records), plots })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::record::tests::ok_measurement;
    use crate::stores::record::{Environment, Mode, Status, SCHEMA, SELF_PEER};

    /// 1 TFLOP of work: TFLOP/s is 10⁶ / µs.
    const FLOPS: f64 = 1e12;

    fn measurement(name: &str, samples_us: &[f64]) -> Measurement {
        ok_measurement(name, samples_us, Some(true))
    }

    fn case(sq: usize, causal: &str) -> CaseRecord {
        CaseRecord {
            b: 2,
            h: 16,
            hkv: 16,
            sq,
            sk: sq,
            d: 128,
            dtype: "bf16".into(),
            causal: causal.into(),
            layout: "bhsd".into(),
            flops: FLOPS,
        }
    }

    /// Three cases: ours 100 µs vs best peer 150 (1.5×); ours 200 vs 100 (0.5×; the faster
    /// `self` control is ignored); ours 100 vs a missing peer and 300 → 3×.
    fn record() -> NamedRecord {
        let missing = Measurement { status: Status::Missing, samples_us: vec![], ..measurement("fa4", &[]) };
        let results = vec![
            ResultRecord {
                case: case(1024, "none"),
                ours: measurement("evoattn_k", &[90.0, 100.0, 110.0]),
                peers: vec![measurement("sdpa-flash", &[150.0, 150.0, 150.0]), measurement("sdpa-cudnn", &[200.0; 3])],
            },
            ResultRecord {
                case: case(2048, "none"),
                ours: measurement("evoattn_k", &[200.0; 3]),
                peers: vec![measurement("sdpa-flash", &[100.0; 3]), measurement(SELF_PEER, &[50.0; 3])],
            },
            ResultRecord {
                case: case(4096, "none"),
                ours: measurement("evoattn_k", &[100.0; 3]),
                peers: vec![missing, measurement("sdpa-flash", &[300.0; 3])],
            },
        ];
        let env = Environment {
            gpu: "NVIDIA H100 80GB HBM3".into(),
            mode: Some(Mode::Eager),
            samples: 3,
            date_utc: "2026-11-22T00:00:00Z".into(),
            ..Environment::default()
        };
        NamedRecord { name: "grid".into(), record: BenchRecord { schema: SCHEMA.into(), env, results } }
    }

    #[test]
    fn rows_pick_the_fastest_non_control_peer() {
        let named = record();
        let rows: Vec<CaseRow> = named.record.results.iter().map(case_row).collect();
        assert_eq!(rows[0].shape, "2×16×1024×128");
        assert_eq!(rows[0].best_peer.as_deref(), Some("sdpa-flash"));
        assert_eq!(rows[0].speedup, Some(1.5));
        assert_eq!(rows[0].verdict, Some(Verdict::Excellent));
        assert_eq!(rows[0].ours.unwrap().tflops, 1e4);
        assert_eq!(rows[0].ours.unwrap().p10_us, 92.0);
        assert_eq!(rows[1].best_peer.as_deref(), Some("sdpa-flash"));
        assert_eq!(rows[1].speedup, Some(0.5));
        assert_eq!(rows[1].verdict, Some(Verdict::Regression));
        assert_eq!(rows[2].peers[0], ("fa4".to_string(), None));
        assert_eq!(rows[2].speedup, Some(3.0));
    }

    #[test]
    fn geomean_of_worked_numbers() {
        // (1.5 · 0.5 · 3)^(1/3) = 2.25^(1/3)
        let g = geomean(&[1.5, 0.5, 3.0]).unwrap();
        assert!((g - 2.25f64.cbrt()).abs() < 1e-12, "{g}");
        assert_eq!(geomean(&[]), None);
    }

    #[test]
    fn markdown_has_the_environment_table_and_summary() {
        let report = build(&[record()]).unwrap();
        let md = &report.markdown;
        assert!(md.contains("GPU NVIDIA H100 80GB HBM3"), "{md}");
        assert!(md.contains("mode eager, 3 samples"), "{md}");
        assert!(md.contains("| sdpa-flash µs | sdpa-cudnn µs | self µs | fa4 µs |"), "{md}");
        assert!(md.contains("| 2×16×1024×128 | bf16 | none | `evoattn_k` | 100.0 | 10000.0 | 150.0 | 200.0 | — | — | sdpa-flash | 1.500× | excellent |"), "{md}");
        assert!(md.contains("**1.310×** (good) over 3 cases"), "{md}");
        assert!(md.contains("worst case 2×16×2048×128 bf16 mask none: 0.500× against sdpa-flash"), "{md}");
        assert!(md.contains("![grid-speedup.svg](grid-speedup.svg)"), "{md}");
    }

    #[test]
    fn csv_has_one_row_per_implementation() {
        let text = csv(&[record()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        // 3 cases × (ours + 2 peers)
        assert_eq!(lines.len(), 1 + 9);
        assert_eq!(
            lines[1],
            "grid,2,16,16,1024,1024,128,bf16,none,bhsd,evoattn_k,ours,ok,3,100.000,92.000,108.000,10000.00"
        );
        assert_eq!(lines[8], "grid,2,16,16,4096,4096,128,bf16,none,bhsd,fa4,peer,missing,0,,,,");
        assert!(lines.iter().all(|l| l.split(',').count() == CSV_HEADER.split(',').count()));
    }

    #[test]
    fn plots_are_svg_with_every_series() {
        let report = build(&[record()]).unwrap();
        let names: Vec<&str> = report.plots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["grid-tflops-bf16-d128-none.svg", "grid-speedup.svg"]);
        for (name, svg) in &report.plots {
            assert!(svg.starts_with("<svg"), "{name}");
            assert!(svg.trim_end().ends_with("</svg>"), "{name}");
        }
        let lines = &report.plots[0].1;
        for series in ["ours", "sdpa-flash", "sdpa-cudnn", "self", "TFLOP/s (median)", "\n1024\n", "\n4096\n"] {
            assert!(lines.contains(series), "{series} missing");
        }
        let bars = &report.plots[1].1;
        for text in ["parity (1.0)", "ours faster", "ours slower", "2×16×2048×128 bf16 none"] {
            assert!(bars.contains(text), "{text} missing");
        }
    }

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
        let rows: Vec<CaseRow> = named.record.results.iter().map(case_row).filter(|r| r.speedup < Some(1.0)).collect();
        let svg = speedup_svg("slower only", &rows).unwrap();
        assert!(svg.contains("ours slower") && !svg.contains("ours faster"), "{svg}");
        let report = build(&[record()]).unwrap();
        let lines = &report.plots[0].1;
        for name in ["ours", "sdpa-flash", "sdpa-cudnn", "self"] {
            assert_eq!(lines.matches(&format!(">\n{name}\n<")).count(), 1, "{name}");
        }
    }
}
