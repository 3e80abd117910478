//! `results.csv`: one row per (record, case, implementation); with the history, `history.csv`:
//! one row per stored measurement.

use super::model::{timing, NamedRecord};
use super::{Exporter, Sources};
use crate::stores::history::Row;
use std::fmt::Write as _;

/// Every measurement as a row.
pub struct Csv;

impl Exporter for Csv {
    fn export(&self, sources: &Sources) -> anyhow::Result<Vec<(String, String)>> {
        let mut files = vec![("results.csv".to_string(), results(sources.records))];
        if let Some(rows) = sources.history {
            files.push(("history.csv".to_string(), history(rows)));
        }
        Ok(files)
    }
}

pub const CSV_HEADER: &str =
    "record,b,h,hkv,sq,sk,d,dtype,causal,layout,implementation,role,status,n,median_us,p10_us,p90_us,tflops";

/// One row per (record, case, implementation), ours first; the numbers are empty where the
/// implementation did not run.
fn results(records: &[NamedRecord]) -> String {
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

const HISTORY_CSV_HEADER: &str = "date_utc,git_commit,gpu,driver,mode,b,h,hkv,sq,sk,d,dtype,causal,layout,role,kernel,\
                                  source,n,median_us,p10_us,p90_us";

/// One line per stored measurement, oldest first.
fn history(rows: &[Row]) -> String {
    let mut out = format!("{HISTORY_CSV_HEADER}\n");
    for r in rows {
        let k = &r.key;
        let s = crate::verdicts::stats::summarize(&r.samples_us);
        let q = |f: fn(&crate::verdicts::stats::Summary) -> f64| {
            s.as_ref().map_or(String::new(), |s| format!("{:.3}", f(s)))
        };
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{},{}\n",
            r.date_utc,
            r.git_commit.as_deref().unwrap_or(""),
            k.gpu,
            r.driver,
            k.mode,
            k.shape.b,
            k.shape.h,
            k.shape.hkv,
            k.shape.sq,
            k.shape.sk,
            k.shape.d,
            k.dtype,
            k.causal,
            k.layout,
            r.role,
            r.kernel,
            r.source,
            r.samples_us.len(),
            r.median_us,
            q(|s| s.p10),
            q(|s| s.p90),
        ));
    }
    out
}
