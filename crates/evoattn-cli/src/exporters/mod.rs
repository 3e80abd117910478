//! Reports of bench records and the run history, one exporter per format (as hyperfine
//! has them): `report.md` (markdown), `results.csv` and `history.csv` (csv), the plots (svg).
//! What the formats share is computed once in `model`. Pure: `evoattn report` reads the
//! sources and writes the files.

pub mod csv;
pub mod markdown;
mod model;
pub mod svg;

pub use model::NamedRecord;

use crate::stores::history::Row;

/// What a report is made of: bench records, and the run history when asked for.
pub struct Sources<'a> {
    pub records: &'a [NamedRecord],
    pub history: Option<&'a [Row]>,
}

/// One output format.
pub trait Exporter {
    /// The files (name, contents) this format writes for `sources`.
    fn export(&self, sources: &Sources) -> anyhow::Result<Vec<(String, String)>>;
}

/// Every format `evoattn report` writes.
pub const ALL: [&dyn Exporter; 3] = [&markdown::Markdown, &csv::Csv, &svg::Svg];

#[cfg(test)]
pub(crate) mod tests {
    use super::model::{case_row, geomean, CaseRow};
    use super::*;
    use crate::stores::history::{CaseKey, ROLE_OURS};
    use crate::stores::record::tests::ok_measurement;
    use crate::stores::record::{
        BenchRecord, CaseRecord, Environment, Measurement, Mode, ResultRecord, Status, SCHEMA, SELF_PEER,
    };
    use crate::verdicts::stats::Verdict;

    /// The files every format writes for `sources`, by name.
    fn export(sources: &Sources) -> Vec<(String, String)> {
        ALL.iter().flat_map(|e| e.export(sources).unwrap()).collect()
    }

    fn file<'a>(files: &'a [(String, String)], name: &str) -> &'a str {
        &files.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name}")).1
    }

    fn records_only(records: &[NamedRecord]) -> Vec<(String, String)> {
        export(&Sources { records, history: None })
    }

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
    pub(crate) fn record() -> NamedRecord {
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
        let rows: Vec<CaseRow> = named.record.results.iter().map(|r| case_row(r, &named.record.env)).collect();
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
        let files = records_only(&[record()]);
        let md = file(&files, "report.md");
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
        let files = records_only(&[record()]);
        let lines: Vec<&str> = file(&files, "results.csv").lines().collect();
        assert_eq!(lines[0], csv::CSV_HEADER);
        // 3 cases × (ours + 2 peers)
        assert_eq!(lines.len(), 1 + 9);
        assert_eq!(
            lines[1],
            "grid,2,16,16,1024,1024,128,bf16,none,bhsd,evoattn_k,ours,ok,3,100.000,92.000,108.000,10000.00"
        );
        assert_eq!(lines[8], "grid,2,16,16,4096,4096,128,bf16,none,bhsd,fa4,peer,missing,0,,,,");
        assert!(lines.iter().all(|l| l.split(',').count() == csv::CSV_HEADER.split(',').count()));
        assert!(files.iter().all(|(name, _)| name != "history.csv"), "no history asked for");
    }

    #[test]
    fn plots_are_svg_with_every_series() {
        let plots = svg::Svg.export(&Sources { records: &[record()], history: None }).unwrap();
        let names: Vec<&str> = plots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["grid-tflops-bf16-d128-none.svg", "grid-speedup.svg"]);
        for (name, svg) in &plots {
            assert!(svg.starts_with("<svg"), "{name}");
            assert!(svg.trim_end().ends_with("</svg>"), "{name}");
        }
        let lines = &plots[0].1;
        for series in ["ours", "sdpa-flash", "sdpa-cudnn", "self", "TFLOP/s (median)", "\n1024\n", "\n4096\n"] {
            assert!(lines.contains(series), "{series} missing");
        }
        let bars = &plots[1].1;
        for text in ["parity (1.0)", "ours faster", "ours slower", "2×16×2048×128 bf16 none"] {
            assert!(bars.contains(text), "{text} missing");
        }
    }

    fn row(date: &str, commit: &str, role: &str, kernel: &str, median: f64) -> Row {
        Row {
            key: CaseKey {
                gpu: "NVIDIA H100 80GB HBM3".into(),
                mode: "eager".into(),
                shape: evoattn::Shape { b: 4, h: 16, hkv: 16, sq: 4096, sk: 4096, d: 128 },
                dtype: "bf16".into(),
                causal: "none".into(),
                layout: "bhsd".into(),
                family: crate::stores::history::family(kernel).into(),
            },
            role: role.into(),
            kernel: kernel.into(),
            source: "bench".into(),
            date_utc: date.into(),
            git_commit: Some(commit.into()),
            version: "0.1.0".into(),
            driver: "580.65".into(),
            block: 20,
            median_us: median,
            samples_us: vec![median * 0.98, median, median * 1.02],
            correct: Some(true),
        }
    }

    fn history() -> Vec<Row> {
        let mma = "evoattn_mma_bf16_d128_bm128_bn64_s3_qr1";
        let wgmma = "evoattn_wgmma_bf16_d128_bn128_s2_wg2_ldtma";
        vec![
            row("2026-11-20T10:00:00Z", "aaaaaaaaaa", ROLE_OURS, mma, 1500.0),
            row("2026-11-20T10:00:00Z", "aaaaaaaaaa", "peer", "sdpa-cudnn", 820.0),
            row("2026-11-21T10:00:00Z", "bbbbbbbbbb", ROLE_OURS, mma, 1400.0),
            row("2026-11-21T10:00:00Z", "bbbbbbbbbb", "peer", "sdpa-cudnn", 825.0),
            row("2026-11-22T10:00:00Z", "cccccccccc", ROLE_OURS, wgmma, 1019.0),
            row("2026-11-22T10:00:00Z", "cccccccccc", "peer", "sdpa-cudnn", 821.0),
            row("2026-11-22T10:00:00Z", "cccccccccc", "peer", "self", 1000.0),
        ]
    }

    #[test]
    fn one_plot_per_problem_with_one_legend_entry_per_series() {
        let rows = history();
        let files = export(&Sources { records: &[], history: Some(&rows) });
        let md = file(&files, "report.md");
        let plots: Vec<&(String, String)> = files.iter().filter(|(n, _)| n.ends_with(".svg")).collect();
        assert_eq!(plots.len(), 1);
        assert_eq!(plots[0].0, "history-nvidia-h100-80gb-hbm3-eager-4x16x4096x128-bf16-none-bhsd.svg");
        assert!(
            md.contains("| 4,16,4096,128 | bf16 | none | bhsd | eager | 3 | 1019.0 (ccccccc 11-22 10:00) | 1019.0 (ccccccc 11-22 10:00) | 1.000× |"),
            "{md}"
        );
        let svg = &plots[0].1;
        // Two runs of mma and one of wgmma: one legend entry each; the `self` control is no series.
        for (label, count) in [("ours (mma)", 1), ("ours (wgmma)", 1), ("sdpa-cudnn", 1), ("self", 0)] {
            assert_eq!(svg.matches(&format!(">\n{label}\n<")).count(), count, "{label}");
        }
        for tick in
            ["aaaaaaa 11-20 10:00", "bbbbbbb 11-21 10:00", "ccccccc 11-22 10:00", "regression line: best of ours + 2%"]
        {
            assert!(svg.contains(tick), "{tick} missing");
        }
    }

    #[test]
    fn a_single_run_is_no_history() {
        let rows = &history()[4..];
        let files = export(&Sources { records: &[], history: Some(rows) });
        let md = file(&files, "report.md");
        assert!(files.iter().all(|(n, _)| !n.ends_with(".svg")));
        assert_eq!(file(&files, "history.csv").lines().count(), 1 + rows.len());
        assert!(md.contains("No problem of ours was measured in 2 or more runs"), "{md}");
    }
}
