//! How one attention problem becomes the library paths' work (#38): Q·Kᵀ as cuBLASLt
//! strided-batched GEMMs into a materialised score matrix S, one row kernel over S (scale,
//! mask, max, exp, sum, LSE, P), then P·V as GEMMs into O, in chunks of S that fit a memory
//! budget. Pure arithmetic over the problem's strides: nothing here touches a GPU.
//!
//! The unit of work is one (batch, KV head) and some query heads of its group. Where a group's
//! query heads hold their rows back to back (BHSD: head stride = Sq · row stride, Q's and O's)
//! a unit is the whole group, its heads folded into the GEMMs' n (GQA with no copies);
//! elsewhere (BSHD) a unit is one query head and the units go head by head of the group, so
//! that consecutive units step K and V by a KV head and a batch of GEMMs never repeats an
//! operand (a zero batch stride). Consecutive units whose operands all advance by one stride
//! are one batched call.

use crate::problem::{Problem, Strides};

/// One operand of a GEMM as cuBLASLt reads it: column-major, `ld` elements between columns,
/// `offset` elements from its tensor's base, `batch_stride` elements between the batch's GEMMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    pub offset: usize,
    pub ld: usize,
    pub batch_stride: usize,
    /// cuBLAS's op(X) = Xᵀ.
    pub transposed: bool,
}

impl Operand {
    /// Bytes from its tensor's base to its first element, of `elem_bytes` each.
    pub fn offset_bytes(&self, elem_bytes: usize) -> usize {
        self.offset * elem_bytes
    }

    /// The device address of its first element, its tensor at `base`.
    pub fn address(&self, base: u64, elem_bytes: usize) -> u64 {
        base + self.offset_bytes(elem_bytes) as u64
    }
}

/// `batch` GEMMs C (m × n) = op(A) (m × k) · op(B) (k × n), column-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub a: Operand,
    pub b: Operand,
    pub c: Operand,
}

/// Which query heads one unit covers, and how units are numbered: unit `u` is (batch, KV head)
/// `u % (B · Hkv)` and heads `(u / (B · Hkv)) · heads` .. `+ heads` of that group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Units {
    /// Query heads a unit holds: the whole group (folded) or one.
    pub heads: usize,
    /// B · Hkv · (group / heads).
    pub count: usize,
    /// Rows of S a unit holds: heads · Sq.
    pub rows: usize,
}

/// S in the scratch: each unit's rows back to back, `ld` elements a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScoreLayout {
    /// Elements between rows: Sk rounded up to 16 bytes.
    pub ld: usize,
    /// Bytes of one element (4: f32 scores; 2: the input dtype's).
    pub elem_bytes: usize,
}

impl ScoreLayout {
    /// P's row stride in 16-bit elements: P is written over S in place, each row's 16-bit
    /// probabilities from the start of its own row.
    pub fn p_ld(&self) -> usize {
        self.ld * self.elem_bytes / 2
    }
}

/// One chunk of units, run as Q·Kᵀ, the row kernel, P·V, with S starting at scratch offset 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub first_unit: usize,
    pub units: usize,
    /// S = Q·Kᵀ (as Sᵀ = K·Qᵀ in column-major terms): A is K, B is Q, C is S.
    pub qk: Vec<Gemm>,
    /// O = P·V (as Oᵀ = Vᵀ·Pᵀ): A is V, B is P (16-bit, over S), C is O.
    pub pv: Vec<Gemm>,
}

/// The whole plan of a problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub units: Units,
    pub scores: ScoreLayout,
    pub chunks: Vec<Chunk>,
    /// Bytes of S the largest chunk takes (the scratch to allocate).
    pub scratch_bytes: usize,
}

/// Every GEMM dimension, leading dimension and batch count cuBLASLt takes is a 32-bit int
/// (batch strides are 64-bit).
const GEMM_DIM_MAX: usize = i32::MAX as usize;
/// Row starts of S aligned to this many bytes (cuBLASLt's fast kernels want 16-byte aligned
/// columns).
const ROW_ALIGN_BYTES: usize = 16;

/// The plan of `problem` (validated, 16-bit) with scores of `elem_bytes` (4 or 2) and S given at
/// most `budget_bytes`; or why it cannot run (one query head's scores do not fit, or a
/// dimension cuBLASLt cannot take).
pub fn plan(problem: &Problem, elem_bytes: usize, budget_bytes: usize) -> Result<Geometry, String> {
    let s = problem.shape;
    if s.sk == 0 {
        return Err("Sk = 0 leaves no scores to materialise (impl=auto runs it: O = 0, LSE = -inf)".into());
    }
    let ld = s.sk.next_multiple_of(ROW_ALIGN_BYTES / elem_bytes);
    let scores = ScoreLayout { ld, elem_bytes };
    let row_bytes = ld * elem_bytes;
    let group = s.h / s.hkv;
    let (q, o) = (problem.q_strides, problem.o_strides);
    let foldable = group == 1 || (q.head == s.sq * q.seq && o.head == s.sq * o.seq);
    // A whole group a unit where its rows are contiguous and fit; else one head.
    let fits = |heads: usize| heads * s.sq * row_bytes <= budget_bytes;
    let heads = if foldable && fits(group) { group } else { 1 };
    if !fits(heads) {
        return Err(format!(
            "one query head's scores ({} x {} {}) take {} bytes, more than the {} bytes of free device memory \
             the plan may use",
            s.sq,
            s.sk,
            if elem_bytes == 4 { "f32" } else { "16-bit" },
            s.sq * row_bytes,
            budget_bytes
        ));
    }
    let units = Units { heads, count: s.b * s.hkv * (group / heads), rows: heads * s.sq };
    for (what, value) in [("rows of one unit", units.rows), ("keys", s.sk), ("row stride of S", ld)] {
        if value > GEMM_DIM_MAX {
            return Err(format!("{what} ({value}) exceed cuBLASLt's 32-bit dimensions"));
        }
    }
    if problem.is_empty() {
        // No query rows: nothing to launch.
        return Ok(Geometry { units, scores, chunks: Vec::new(), scratch_bytes: 0 });
    }
    let per_chunk = (budget_bytes / (units.rows * row_bytes)).clamp(1, GEMM_DIM_MAX);
    let chunks = (0..units.count)
        .step_by(per_chunk)
        .map(|first| {
            let count = per_chunk.min(units.count - first);
            Chunk {
                first_unit: first,
                units: count,
                qk: batched(first, count, |u| qk_gemm(problem, &units, &scores, first, u)),
                pv: batched(first, count, |u| pv_gemm(problem, &units, &scores, first, u)),
            }
        })
        .collect::<Vec<_>>();
    let scratch_bytes = chunks.iter().map(|c| c.units).max().unwrap_or(0) * units.rows * row_bytes;
    Ok(Geometry { units, scores, chunks, scratch_bytes })
}

/// Unit `u`'s (batch, KV head, first query head).
fn unit_heads(problem: &Problem, units: &Units, u: usize) -> (usize, usize, usize) {
    let s = problem.shape;
    let (bk, part) = (u % (s.b * s.hkv), u / (s.b * s.hkv));
    let (b, kvh) = (bk / s.hkv, bk % s.hkv);
    (b, kvh, kvh * (s.h / s.hkv) + part * units.heads)
}

fn at(strides: Strides, b: usize, head: usize) -> usize {
    b * strides.batch + head * strides.head
}

/// Unit `u`'s Q·Kᵀ as one GEMM (batch 1), S at its place in a chunk starting at `first`.
fn qk_gemm(problem: &Problem, units: &Units, scores: &ScoreLayout, first: usize, u: usize) -> Gemm {
    let s = problem.shape;
    let (b, kvh, head) = unit_heads(problem, units, u);
    let (q, k) = (problem.q_strides, problem.k_strides);
    Gemm {
        m: s.sk,
        n: units.rows,
        k: s.d,
        batch: 1,
        a: Operand { offset: at(k, b, kvh), ld: k.seq, batch_stride: 0, transposed: true },
        b: Operand { offset: at(q, b, head), ld: q.seq, batch_stride: 0, transposed: false },
        c: Operand { offset: (u - first) * units.rows * scores.ld, ld: scores.ld, batch_stride: 0, transposed: false },
    }
}

/// Unit `u`'s P·V as one GEMM (batch 1); P's offsets in 16-bit elements.
fn pv_gemm(problem: &Problem, units: &Units, scores: &ScoreLayout, first: usize, u: usize) -> Gemm {
    let s = problem.shape;
    let (b, kvh, head) = unit_heads(problem, units, u);
    let (v, o) = (problem.v_strides, problem.o_strides);
    let p_ld = scores.p_ld();
    Gemm {
        m: s.d,
        n: units.rows,
        k: s.sk,
        batch: 1,
        a: Operand { offset: at(v, b, kvh), ld: v.seq, batch_stride: 0, transposed: false },
        b: Operand { offset: (u - first) * units.rows * p_ld, ld: p_ld, batch_stride: 0, transposed: false },
        c: Operand { offset: at(o, b, head), ld: o.seq, batch_stride: 0, transposed: false },
    }
}

/// Units `first` .. `first + count` as few batched GEMMs as their offsets allow: a unit joins
/// the call before it when every operand advances by that call's (non-zero) stride.
fn batched(first: usize, count: usize, gemm: impl Fn(usize) -> Gemm) -> Vec<Gemm> {
    let mut calls: Vec<Gemm> = Vec::new();
    for u in first..first + count {
        let next = gemm(u);
        if let Some(call) = calls.last_mut() {
            if let Some(strides) = joins(call, &next) {
                (call.a.batch_stride, call.b.batch_stride, call.c.batch_stride) = strides;
                call.batch += 1;
                continue;
            }
        }
        calls.push(next);
    }
    calls
}

/// The batch strides with which `next` continues `call`, if it does.
fn joins(call: &Gemm, next: &Gemm) -> Option<(usize, usize, usize)> {
    if call.batch >= GEMM_DIM_MAX {
        return None;
    }
    let step = |first: &Operand, stride: usize, next: &Operand| {
        let delta = next.offset.checked_sub(first.offset + (call.batch - 1) * stride)?;
        let stride = if call.batch == 1 { delta } else { stride };
        (delta == stride && stride > 0).then_some(stride)
    };
    Some((
        step(&call.a, call.a.batch_stride, &next.a)?,
        step(&call.b, call.b.batch_stride, &next.b)?,
        step(&call.c, call.c.batch_stride, &next.c)?,
    ))
}

/// The LSE index (`[B, H, Sq]`, dense) of row `row` of unit `u`: what the row kernel computes
/// from the same [`Units`] (kernels/library/rows.cu), written here as its specification.
pub fn lse_index(problem: &Problem, units: &Units, u: usize, row: usize) -> usize {
    let (b, _, head) = unit_heads(problem, units, u);
    let s = problem.shape;
    (b * s.h + head + row / s.sq) * s.sq + row % s.sq
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Dtype, Layout, Shape};

    const GIB: usize = 1 << 30;

    fn problem(shape: Shape, layout: Layout) -> Problem {
        Problem::dense(shape, Dtype::Bf16, layout)
    }

    #[test]
    fn bhsd_folds_each_group_into_n_and_batches_every_group_in_one_call() {
        let p = problem(Shape { b: 2, h: 8, hkv: 2, sq: 100, sk: 70, d: 64 }, Layout::Bhsd);
        let g = plan(&p, 4, GIB).unwrap();
        // Four query heads a unit, one unit a (batch, KV head); S rows 72 floats apart (70 keys
        // rounded up to 16 bytes).
        assert_eq!(g.units, Units { heads: 4, count: 4, rows: 400 });
        assert_eq!(g.scores, ScoreLayout { ld: 72, elem_bytes: 4 });
        assert_eq!(g.chunks.len(), 1);
        let [qk] = g.chunks[0].qk[..] else { panic!("{:?}", g.chunks[0].qk) };
        assert_eq!((qk.m, qk.n, qk.k, qk.batch), (70, 400, 64, 4));
        // K: one KV head a GEMM (its 70 x 64 rows), read transposed; Q: four heads of 100 rows.
        assert_eq!(qk.a, Operand { offset: 0, ld: 64, batch_stride: 70 * 64, transposed: true });
        assert_eq!(qk.b, Operand { offset: 0, ld: 64, batch_stride: 4 * 100 * 64, transposed: false });
        assert_eq!(qk.c, Operand { offset: 0, ld: 72, batch_stride: 400 * 72, transposed: false });
        // P over S in place: 144 bf16 a row; O in its heads' rows.
        let [pv] = g.chunks[0].pv[..] else { panic!() };
        assert_eq!((pv.m, pv.n, pv.k, pv.batch), (64, 400, 70, 4));
        assert_eq!(pv.a, Operand { offset: 0, ld: 64, batch_stride: 70 * 64, transposed: false });
        assert_eq!(pv.b, Operand { offset: 0, ld: 144, batch_stride: 400 * 144, transposed: false });
        assert_eq!(pv.c, Operand { offset: 0, ld: 64, batch_stride: 4 * 100 * 64, transposed: false });
        assert_eq!(g.scratch_bytes, 4 * 400 * 72 * 4);
    }

    #[test]
    fn bshd_takes_one_head_a_unit_and_batches_over_kv_heads() {
        // Heads interleave in a row: each call is one batch and one head of every group, over
        // the three KV heads (K steps by one head, Q by a group).
        let p = problem(Shape { b: 2, h: 6, hkv: 3, sq: 10, sk: 20, d: 64 }, Layout::Bshd);
        let g = plan(&p, 2, GIB).unwrap();
        assert_eq!(g.units, Units { heads: 1, count: 12, rows: 10 });
        let calls = &g.chunks[0].qk;
        assert_eq!(calls.len(), 4, "{calls:?}");
        for call in calls {
            assert_eq!(call.batch, 3);
            assert_eq!((call.a.ld, call.a.batch_stride), (3 * 64, 64));
            assert_eq!((call.b.ld, call.b.batch_stride), (6 * 64, 2 * 64));
        }
        // The second call is batch 1's first heads: K from batch 1, Q's head 0 of batch 1.
        assert_eq!((calls[1].a.offset, calls[1].b.offset), (20 * 3 * 64, 10 * 6 * 64));
        // 16-bit scores: P is S, the same row stride.
        assert_eq!(g.scores.p_ld(), g.scores.ld);
        assert_eq!(g.chunks[0].pv.len(), 4);
    }

    #[test]
    fn a_budget_cuts_the_units_into_chunks_that_cover_each_once() {
        let p = problem(Shape { b: 3, h: 8, hkv: 2, sq: 64, sk: 64, d: 64 }, Layout::Bhsd);
        // One group's scores: 4 heads x 64 rows x 64 floats = 64 KiB; 150 KiB holds two.
        let g = plan(&p, 4, 150 << 10).unwrap();
        assert_eq!(g.units.heads, 4);
        let covered: Vec<(usize, usize)> = g.chunks.iter().map(|c| (c.first_unit, c.units)).collect();
        assert_eq!(covered, [(0, 2), (2, 2), (4, 2)]);
        assert_eq!(g.scratch_bytes, 2 * (64 << 10));
        // Each chunk's S starts at the scratch's start.
        assert!(g.chunks.iter().all(|c| c.qk[0].c.offset == 0 && c.pv[0].b.offset == 0));
        // Less than a group: one head a unit; less than a head: the reason, with the bytes.
        assert_eq!(plan(&p, 4, 20 << 10).unwrap().units, Units { heads: 1, count: 24, rows: 64 });
        let err = plan(&p, 4, 8 << 10).unwrap_err();
        assert!(err.contains("64 x 64 f32") && err.contains("16384 bytes"), "{err}");
    }

    #[test]
    fn no_query_rows_plan_nothing_and_no_keys_are_refused_with_the_reason() {
        let empty = problem(Shape { b: 2, h: 4, hkv: 2, sq: 0, sk: 64, d: 64 }, Layout::Bhsd);
        let g = plan(&empty, 4, GIB).unwrap();
        assert!(g.chunks.is_empty() && g.scratch_bytes == 0);
        let no_keys = problem(Shape { b: 1, h: 1, hkv: 1, sq: 8, sk: 0, d: 64 }, Layout::Bhsd);
        assert!(plan(&no_keys, 4, GIB).unwrap_err().contains("Sk = 0"));
    }

    #[test]
    fn every_output_row_and_lse_entry_is_written_by_exactly_one_unit_row() {
        for (layout, budget) in [(Layout::Bhsd, GIB), (Layout::Bshd, GIB), (Layout::Bhsd, 3 * 10 * 16 * 4)] {
            let p = problem(Shape { b: 2, h: 6, hkv: 2, sq: 10, sk: 13, d: 64 }, layout);
            let g = plan(&p, 4, budget).unwrap();
            let s = p.shape;
            let mut seen = vec![0u8; s.b * s.h * s.sq];
            let mut o_rows = std::collections::BTreeSet::new();
            for chunk in &g.chunks {
                for u in chunk.first_unit..chunk.first_unit + chunk.units {
                    for row in 0..g.units.rows {
                        seen[lse_index(&p, &g.units, u, row)] += 1;
                    }
                }
                for call in &chunk.pv {
                    for i in 0..call.batch {
                        for row in 0..call.n {
                            assert!(o_rows.insert(call.c.offset + i * call.c.batch_stride + row * call.c.ld));
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{layout:?} {budget}");
            // O's rows are exactly the problem's (b, h, i) rows.
            let o = p.o_strides;
            let want: std::collections::BTreeSet<usize> = (0..s.b)
                .flat_map(|b| (0..s.h).flat_map(move |h| (0..s.sq).map(move |i| b * o.batch + h * o.head + i * o.seq)))
                .collect();
            assert_eq!(o_rows, want, "{layout:?} {budget}");
        }
    }
}
