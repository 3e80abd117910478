//! Property-based tests (issue 34): the library's parsers and validators driven with arbitrary
//! values. Each property: a typed error or a result, never a panic, and a result only for what
//! the kernels may be launched on (every count it implies fits the documented limits). The
//! CLI's parsers have theirs in crates/evoattn-cli/src/properties.rs; docs/fuzzing.md lists both
//! and says how to run more cases.

use evoattn::buffers::{validate_buffers, BufferSpan, BUFFER_ALIGN};
use evoattn::config::lever::{Family, Kind};
use evoattn::config::SplitkvConfig;
use evoattn::fp8::{e4m3_to_f32, quantize, QuantizeError, E4M3_UNIT_ROUNDOFF};
use evoattn::plan::{plan, Request};
use evoattn::problem::{MAX_INDEX, VECTOR_ELEMS};
use evoattn::reference::{attention_f64, logical_offsets};
use evoattn::runtime::tma::{TensorMapGeometry, MAX_BOX_ROWS};
use evoattn::{
    Arch, Causal, Dtype, Impl, KernelConfig, KernelSpec, Layout, MmaConfig, Problem, ReferenceConfig, Shape,
    StridedTensor, Strides, TensorName, WgmmaConfig, MAX_HEAD_DIM,
};
use proptest::prelude::*;
use proptest::sample::select;

/// Every property's runner. Cases: `PROPTEST_CASES` when set, else proptest's default of 256 a
/// property, which keeps these files to a few seconds of CI's whole test run; docs/fuzzing.md
/// runs 10^5. No failure files: an input that once failed is kept as a named test instead.
fn config() -> ProptestConfig {
    ProptestConfig { failure_persistence: None, ..ProptestConfig::default() }
}

const TENSORS: [TensorName; 5] = [TensorName::Q, TensorName::K, TensorName::V, TensorName::O, TensorName::Lse];

// ---- strategies ----
//
// Composite strategies are boxed: unboxed, their value trees are large enough to overflow a test
// thread's stack in an unoptimised build.

/// A size as a caller may pass one: mostly small, else a power of two give or take two, the
/// 32-bit limits, or anything up to `usize::MAX`.
fn size() -> BoxedStrategy<usize> {
    prop_oneof![
        6 => 0usize..=9,
        2 => 0usize..=5000,
        2 => (0..usize::BITS, -2isize..=2).prop_map(|(k, d)| (1usize << k).wrapping_add_signed(d)),
        1 => select(vec![MAX_INDEX - 1, MAX_INDEX, MAX_INDEX + 1, 1 << 32, 1 << 63, usize::MAX - 1, usize::MAX]),
        1 => any::<usize>(),
    ]
    .boxed()
}

/// A head dim: mostly a multiple of 8 up to 264 (the kernels take 64, 128 and 256), else any size.
fn head_dim() -> BoxedStrategy<usize> {
    prop_oneof![4 => (0usize..=33).prop_map(|k| 8 * k), 1 => size()].boxed()
}

fn any_strides() -> BoxedStrategy<Strides> {
    let stride = || prop_oneof![3 => (0usize..=64).prop_map(|k| VECTOR_ELEMS * k), 1 => size()];
    (stride(), stride(), stride(), prop_oneof![4 => Just(1usize), 1 => size()])
        .prop_map(|(batch, head, seq, dim)| Strides { batch, head, seq, dim })
        .boxed()
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::Bhsd), Just(Layout::Bshd)]
}

fn dtype() -> impl Strategy<Value = Dtype> {
    select(Dtype::ALL.to_vec())
}

fn causal() -> impl Strategy<Value = Causal> {
    select(Causal::ALL.to_vec())
}

fn scale() -> BoxedStrategy<Option<f32>> {
    prop_oneof![
        3 => Just(None),
        2 => (-8.0f32..8.0).prop_map(Some),
        1 => any::<f32>().prop_map(Some),
        1 => select(vec![0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MIN_POSITIVE, f32::MAX])
            .prop_map(Some),
    ]
    .boxed()
}

/// Strides of one tensor of `heads` heads of `seq` rows: dense in either layout (a transposed
/// view in the other), rows padded, a broadcast (0 above the head dim), or anything.
fn strides_for(heads: usize, seq: usize, d: usize) -> BoxedStrategy<Strides> {
    prop_oneof![
        4 => layout().prop_map(move |l| l.strides(heads, seq, d)),
        1 => (1usize..=3).prop_map(move |pad| {
            let row = d.saturating_add(VECTOR_ELEMS * pad);
            Strides { batch: heads.saturating_mul(seq).saturating_mul(row), head: seq.saturating_mul(row), seq: row, dim: 1 }
        }),
        1 => Just(Strides { batch: 0, head: 0, seq: 0, dim: 1 }),
        1 => any_strides(),
    ]
    .boxed()
}

/// A problem whose every field is arbitrary.
fn any_problem() -> BoxedStrategy<Problem> {
    let shape = (size(), size(), size(), size(), size(), head_dim()).prop_map(|(b, h, hkv, sq, sk, d)| Shape {
        b,
        h,
        hkv,
        sq,
        sk,
        d,
    });
    let strides = [any_strides(), any_strides(), any_strides(), any_strides()];
    (shape, strides, dtype(), causal(), scale(), any::<bool>()).prop_map(problem_of).boxed()
}

/// The problem of a drawn shape, Q/K/V/O strides, dtype, mask, scale and LSE switch.
fn problem_of(
    (shape, [q_strides, k_strides, v_strides, o_strides], dtype, causal, scale, with_lse): (
        Shape,
        [Strides; 4],
        Dtype,
        Causal,
        Option<f32>,
        bool,
    ),
) -> Problem {
    Problem { shape, dtype, causal, scale, q_strides, k_strides, v_strides, o_strides, with_lse }
}

/// A problem that is often valid: sizes up to `max` (Hkv dividing H; `max` at least 1), a head dim the kernels
/// take or another multiple of 8, and each tensor's strides from [`strides_for`].
fn near_valid_problem(max: usize) -> BoxedStrategy<Problem> {
    let d = prop_oneof![3 => select(vec![64usize, 128, 256]), 1 => (1usize..=32).prop_map(|k| VECTOR_ELEMS * k)];
    // Small, or log-uniform up to `max`: large problems that still fit are common.
    let n = move || {
        let log_uniform = (0..=max.ilog2()).prop_flat_map(move |k| (1usize << k) / 2..=(1usize << k).min(max));
        prop_oneof![0..=max.min(9), log_uniform]
    };
    (n(), 1usize..=4, n().prop_map(|n| n.max(1)), n(), n(), d)
        .prop_flat_map(|(b, group, hkv, sq, sk, d)| {
            let shape = Shape { b, h: hkv * group, hkv, sq, sk, d };
            let strides = [
                strides_for(shape.h, sq, d),
                strides_for(hkv, sk, d),
                strides_for(hkv, sk, d),
                strides_for(shape.h, sq, d),
            ];
            (Just(shape), strides, dtype(), causal(), scale(), any::<bool>())
        })
        .prop_map(problem_of)
        .boxed()
}

/// `p` with one size or stride replaced by an arbitrary one.
fn mutated(p: Problem) -> impl Strategy<Value = Problem> {
    (0usize..18, size()).prop_map(move |(field, value)| {
        let mut p = p.clone();
        let s = &mut p.shape;
        let target = match field {
            0 => &mut s.b,
            1 => &mut s.h,
            2 => &mut s.hkv,
            3 => &mut s.sq,
            4 => &mut s.sk,
            5 => &mut s.d,
            6 => &mut p.q_strides.batch,
            7 => &mut p.q_strides.head,
            8 => &mut p.q_strides.seq,
            9 => &mut p.q_strides.dim,
            10 => &mut p.k_strides.batch,
            11 => &mut p.k_strides.head,
            12 => &mut p.k_strides.seq,
            13 => &mut p.v_strides.seq,
            14 => &mut p.o_strides.batch,
            15 => &mut p.o_strides.head,
            16 => &mut p.o_strides.seq,
            _ => &mut p.o_strides.dim,
        };
        *target = value;
        p
    })
}

/// Arbitrary, near-valid and mutated near-valid problems.
fn problem() -> BoxedStrategy<Problem> {
    prop_oneof![
        2 => any_problem(),
        2 => near_valid_problem(9),
        1 => near_valid_problem(4096),
        2 => near_valid_problem(9).prop_flat_map(mutated),
    ]
    .boxed()
}

// ---- what a validated problem guarantees ----

/// Everything [`Problem::validate`]'s `Ok` promises the launch paths: sizes and head dim the
/// kernels take, a usable scale, strides the kernels can step, every tensor's extent within
/// 32-bit indexing and every element count countable, an output that is one element per address.
fn assert_launchable(p: &Problem) -> Result<(), TestCaseError> {
    let s = p.shape;
    prop_assert!(s.d >= 1 && s.d <= MAX_HEAD_DIM && s.d.is_multiple_of(VECTOR_ELEMS), "D={}", s.d);
    for n in [s.b, s.h, s.hkv, s.sq, s.sk] {
        prop_assert!(n <= MAX_INDEX, "a size {n} past 2^31-1 in {s:?}");
    }
    prop_assert!(s.hkv >= 1 && s.h.is_multiple_of(s.hkv) && s.group() == s.h / s.hkv);
    let scale = p.softmax_scale();
    prop_assert!(scale.is_finite() && scale != 0.0, "scale {scale}");
    for t in TENSORS {
        let (extent, elements) = (p.checked_extent(t), p.checked_elements(t));
        prop_assert!(matches!(extent, Some(e) if e <= MAX_INDEX), "{t}: extent {extent:?}");
        prop_assert!(elements.is_some(), "{t}: elements past counting");
        let (extent, elements) = (extent.unwrap_or_default(), elements.unwrap_or_default());
        prop_assert_eq!((p.extent(t), p.elements(t)), (extent, elements));
        if t != TensorName::Lse {
            let st = p.strides(t);
            prop_assert_eq!(st.dim, 1);
            for stride in [st.batch, st.head, st.seq] {
                prop_assert!(stride.is_multiple_of(VECTOR_ELEMS), "{t}: stride {stride}");
            }
        }
        // The first and last logical elements lie at the ends of the extent.
        if elements > 0 {
            let [nb, nh, ns, nd] = p.dims(t);
            let last_d = if t == TensorName::Lse { 0 } else { nd - 1 };
            prop_assert_eq!(p.offset(t, 0, 0, 0, 0), 0);
            prop_assert_eq!(p.offset(t, nb - 1, nh - 1, ns - 1, last_d) + 1, extent);
        } else {
            prop_assert_eq!(extent, 0);
        }
    }
    prop_assert!(!p.overlaps_itself(TensorName::O));
    prop_assert!(p.elements(TensorName::O) <= p.extent(TensorName::O), "an output sharing addresses");
    // Sizes below 2^31: the mask's offset and the pair count are exact.
    if p.causal == Causal::BottomRight {
        prop_assert_eq!(p.causal.offset(s.sq, s.sk), Some(s.sk as i64 - s.sq as i64));
    }
    prop_assert!(p.visible_pairs() <= s.sq as u64 * s.sk as u64);
    prop_assert!(p.flops().is_finite() && p.flops() >= 0.0);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// `validate` answers any problem with a typed error or `Ok`, and `Ok` only for problems
    /// whose every count fits ([`assert_launchable`]).
    #[test]
    fn problem_validate_accepts_only_what_every_count_fits(p in problem()) {
        match p.validate() {
            Ok(()) => assert_launchable(&p)?,
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        // The saturating forms never wrap, whatever the problem.
        for t in TENSORS {
            prop_assert_eq!(p.extent(t), p.checked_extent(t).unwrap_or(usize::MAX));
            prop_assert_eq!(p.elements(t), p.checked_elements(t).unwrap_or(usize::MAX));
        }
    }

    /// Dense problems of any shape: the saturating strides never wrap, and a valid one spans
    /// exactly its elements.
    #[test]
    fn dense_problems_of_any_shape_validate_or_err(
        sizes in (size(), size(), size(), size(), size(), head_dim()), dtype in dtype(), layout in layout()
    ) {
        let (b, h, hkv, sq, sk, d) = sizes;
        let p = Problem::dense(Shape { b, h, hkv, sq, sk, d }, dtype, layout);
        if p.validate().is_ok() {
            assert_launchable(&p)?;
            for t in TENSORS {
                prop_assert_eq!(p.extent(t), p.elements(t), "{} of a dense problem", t);
            }
        }
    }

    /// Views of any rank, sizes and strides make a problem or a typed error; a problem made
    /// and validated fits, and describes the same views it was made from.
    #[test]
    fn strided_views_make_a_problem_or_a_typed_error(
        views in prop_oneof![
            2 => prop::collection::vec(
                (prop::collection::vec(size(), 0..=6), prop::collection::vec(size(), 0..=6)), 4),
            3 => (near_valid_problem(9), layout()).prop_map(|(p, layout)| {
                let order = |x: [usize; 4]| match layout {
                    Layout::Bhsd => x.to_vec(),
                    Layout::Bshd => vec![x[0], x[2], x[1], x[3]],
                };
                [TensorName::Q, TensorName::K, TensorName::V, TensorName::O].iter().map(|&t| {
                    let st = p.strides(t);
                    (order(p.dims(t)), order([st.batch, st.head, st.seq, st.dim]))
                }).collect()
            }),
        ],
        layout in layout(),
        dtype in dtype(),
    ) {
        let view = |i: usize| StridedTensor { sizes: &views[i].0, strides: &views[i].1 };
        match Problem::from_strided(layout, dtype, [view(0), view(1), view(2), view(3)]) {
            Err(e) => prop_assert!(!e.to_string().is_empty()),
            Ok(p) => {
                if p.validate().is_ok() {
                    assert_launchable(&p)?;
                }
                let order = |x: [usize; 4]| match layout {
                    Layout::Bhsd => x.to_vec(),
                    Layout::Bshd => vec![x[0], x[2], x[1], x[3]],
                };
                for (i, t) in [TensorName::Q, TensorName::K, TensorName::V, TensorName::O].into_iter().enumerate() {
                    let st = p.strides(t);
                    prop_assert_eq!(&order(p.dims(t)), &views[i].0, "{}'s sizes", t);
                    prop_assert_eq!(&order([st.batch, st.head, st.seq, st.dim]), &views[i].1, "{}'s strides", t);
                }
            }
        }
    }

    /// `--shape` text: a shape or a message naming the text; a shape reads back from its own
    /// rendering.
    #[test]
    fn shape_text_parses_or_errs_and_round_trips(
        text in prop_oneof![
            1 => ".*",
            1 => "[0-9, +-]{0,40}",
            3 => prop::collection::vec(
                prop_oneof![
                    4 => size().prop_map(|n| n.to_string()),
                    1 => select(vec!["", " 7 ", "+3", "-1", "x", "1e3", "0x10", "18446744073709551616", "٣"])
                        .prop_map(str::to_string),
                ],
                2..=8,
            ).prop_map(|fields| fields.join(",")),
        ]
    ) {
        match Shape::parse(&text) {
            Ok(shape) => {
                prop_assert!((4..=6).contains(&text.split(',').count()));
                prop_assert_eq!(Shape::parse(&shape.to_string()), Ok(shape));
            }
            Err(e) => prop_assert!(e.starts_with(&format!("shape '{text}'")), "{}", e),
        }
    }

    /// Every name parser (dtype, mask, layout, arch, kernel family, `--impl`): `None` or a
    /// value whose own name reads back as it.
    #[test]
    fn names_parse_or_err_and_round_trip(
        text in prop_oneof![
            ".*",
            "(?i)(f16|bf16|fp16|half|bfloat16|none|top-left|bottom-right|true|false|bhsd|bshd|sm_?(80|86|89|90a?)\
              |auto|reference|mma|wgmma|splitkv)[ _-]?",
        ]
    ) {
        if let Some(x) = Dtype::parse(&text) { prop_assert_eq!(Dtype::parse(x.name()), Some(x)); }
        if let Some(x) = Causal::parse(&text) { prop_assert_eq!(Causal::parse(x.name()), Some(x)); }
        if let Some(x) = Layout::parse(&text) { prop_assert_eq!(Layout::parse(x.name()), Some(x)); }
        if let Some(x) = Arch::parse(&text) { prop_assert_eq!(Arch::parse(x.name()), Some(x)); }
        if let Some(x) = Impl::parse(&text) { prop_assert_eq!(Impl::parse(x.name()), Some(x)); }
        match Request::parse(&text) {
            Ok(r) => prop_assert_eq!(Request::parse(&r.to_string()), Ok(r)),
            Err(e) => prop_assert!(e.contains(&text)),
        }
    }

    /// The float64 CPU reference runs every tiny valid problem, whatever its strides: O is a
    /// convex combination of V's rows (finite, within V's range, 0 for a row that sees no
    /// key) and LSE is finite exactly for the rows that see a key.
    #[test]
    fn tiny_valid_problems_run_on_the_cpu_reference(p in near_valid_problem(4), seed in any::<u64>()) {
        if p.validate().is_err() {
            return Ok(());
        }
        let s = p.shape;
        // Values in [-2, 2), exact in both dtypes, from a fixed generator.
        let mut state = seed | 1;
        let mut fill = |t: TensorName| -> Vec<u16> {
            (0..p.extent(t)).map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                p.dtype.to_bits(((state >> 40) % 64) as f64 / 16.0 - 2.0)
            }).collect()
        };
        let (q, k, v) = (fill(TensorName::Q), fill(TensorName::K), fill(TensorName::V));
        let out = attention_f64(&p, &q, &k, &v);
        prop_assert_eq!((out.o.len(), out.lse.len()), (p.elements(TensorName::O), p.elements(TensorName::Lse)));
        for (row, (o_row, lse)) in out.o.chunks(s.d.max(1)).zip(&out.lse).enumerate() {
            let i = row % s.sq;
            let visible = match p.causal.offset(s.sq, s.sk) {
                None => s.sk as i64,
                Some(off) => (i as i64 + off + 1).clamp(0, s.sk as i64),
            };
            if visible > 0 {
                prop_assert!(lse.is_finite(), "row {row}: lse {lse}");
                prop_assert!(o_row.iter().all(|x| x.is_finite() && x.abs() <= 2.0 + 1e-9), "row {row}: {o_row:?}");
            } else {
                prop_assert_eq!(*lse, f64::NEG_INFINITY);
                prop_assert!(o_row.iter().all(|&x| x == 0.0));
            }
        }
    }

    /// The E4M3 quantizer on any tiny problem and any input bits (NaN and infinities included):
    /// an error for an invalid problem or a non-finite element, else descales that are finite
    /// and positive and elements that dequantize to within one E4M3 rounding of the input
    /// (2^-4 relative, or 2^-10 of the descale below the normal range).
    #[test]
    fn the_quantizer_bounds_each_element_or_names_the_fault(
        p in near_valid_problem(4),
        t in select(vec![TensorName::Q, TensorName::K, TensorName::V]),
        bits in proptest::collection::vec(any::<u16>(), 0..2048),
        finite in any::<bool>(),
    ) {
        let Ok(()) = p.validate() else {
            prop_assert!(matches!(quantize(&p, t, &bits), Err(QuantizeError::Invalid(_))));
            return Ok(());
        };
        // Half the cases hold finite values only, so that both verdicts are reached.
        let bits: Vec<u16> = bits.iter().copied().cycle().take(if bits.is_empty() { 0 } else { p.extent(t) })
            .map(|b| if finite && !p.dtype.from_bits(b).is_finite() { 0 } else { b }).collect();
        let value = |o: usize| p.dtype.from_bits(bits[o]);
        match quantize(&p, t, &bits) {
            Err(QuantizeError::Short { .. }) => prop_assert!(bits.len() < p.extent(t)),
            Err(QuantizeError::NonFinite { value: x, .. }) => prop_assert!(!x.is_finite()),
            Err(QuantizeError::SharedAcrossGroups { .. }) => prop_assert!(p.overlaps_itself(t)),
            Err(e) => prop_assert!(false, "unexpected {e}"),
            Ok(q) => {
                prop_assert!(logical_offsets(&p, t).all(|o| value(o).is_finite()));
                let s = p.shape;
                prop_assert_eq!(q.descale.len(), s.b * s.hkv);
                prop_assert!(q.descale.iter().all(|d| d.is_finite() && *d > 0.0));
                let [_, nh, ns, nd] = p.dims(t);
                for (i, o) in logical_offsets(&p, t).enumerate() {
                    let row = i / nd;
                    let g = (row / (nh * ns)) * s.hkv + (row / ns % nh) / (nh / s.hkv);
                    let (x, d) = (value(o), f64::from(q.descale[g]));
                    let back = f64::from(e4m3_to_f32(q.bits[o])) * d;
                    let bound = E4M3_UNIT_ROUNDOFF * x.abs() + d * 2f64.powi(-10) + 1e-6 * x.abs();
                    prop_assert!((back - x).abs() <= bound, "element {}: {} -> {}", i, x, back);
                }
            }
        }
    }

    /// The planner on any valid problem: a kernel that passes `KernelSpec::validate` has a
    /// launch the GPU can take (threads, shared memory, split count, grid and scratch all
    /// countable and within CUDA's limits), or says why it cannot run the problem.
    #[test]
    fn planned_kernels_of_valid_problems_launch_within_limits(
        p in prop_oneof![near_valid_problem(9), near_valid_problem(70000), problem()],
        arch in select(Arch::ALL.to_vec()),
        sm_count in prop_oneof![Just(132u32), 1u32..=1024],
        resident in 1u32..=32,
        request in prop_oneof![
            Just(Request::Auto),
            select(Impl::FORWARD.to_vec()).prop_map(Request::Family),
        ],
    ) {
        if p.validate().is_err() {
            return Ok(());
        }
        let planned = plan(&p, arch, sm_count, request);
        prop_assert_eq!(&planned.problem, &p);
        let spec = planned.spec;
        if spec.validate(arch).is_err() {
            return Ok(());
        }
        assert_spec_fits(&spec, arch)?;
        let Ok(needs) = spec.launch_needs(&p, sm_count, resident) else { return Ok(()) };
        let max_splits = if spec.imp() == Impl::Splitkv { SplitkvConfig::MAX_SPLITS as usize } else { 1 };
        prop_assert!((1..=max_splits).contains(&needs.splits), "{} splits", needs.splits);
        let grid = spec.grid(&p.shape, needs.splits, sm_count);
        prop_assert!(grid.iter().try_fold(1usize, |n, &g| n.checked_mul(g)).is_some(), "grid {grid:?}");
        if !p.is_empty() {
            prop_assert!(grid.iter().all(|&g| g >= 1), "no block for a non-empty problem: grid {grid:?}");
            prop_assert!(grid[0] <= i32::MAX as usize, "grid {grid:?}");
        }
        if let Some((m_blocks, lse_at)) = needs.merge {
            prop_assert_eq!(grid[0], m_blocks * needs.splits);
            prop_assert!(lse_at <= needs.scratch.floats);
        }
        // The TMA maps' geometry: a typed error, or boxes and strides the driver takes.
        if let Some(rows) = spec.tensor_map_rows() {
            let maps = [(TensorName::Q, rows.q), (TensorName::K, Some(rows.kv)), (TensorName::V, Some(rows.kv)), (TensorName::O, rows.o)];
            for (t, rows) in maps {
                let Some(rows) = rows else { continue };
                if let Ok(g) = TensorMapGeometry::new(&p, t, rows, spec.imp()) {
                    prop_assert!(g.box_dims.iter().all(|&d| (1..=MAX_BOX_ROWS).contains(&d)), "{t}: {g:?}");
                    prop_assert!(g.strides_bytes.iter().all(|&b| b % 16 == 0 && b < 1 << 40), "{t}: {g:?}");
                }
            }
        }
    }

    /// Buffers at any addresses and lengths: `validate_buffers` accepts only spans that hold
    /// their tensor's extent, are aligned, end inside the address space, and keep the outputs
    /// apart from everything else.
    #[test]
    fn buffer_spans_validate_only_when_disjoint_aligned_and_large_enough(
        p in near_valid_problem(9),
        spans in prop::collection::vec(
            (
                select(TENSORS.to_vec()),
                prop_oneof![(0u64..64).prop_map(|k| 0x1000 * k), (0u64..4096).prop_map(|k| 8 * k), any::<u64>()],
                prop_oneof![0usize..=20000, size()],
                select(vec![1usize, 2, 4, 8, usize::MAX]),
            ),
            0..=6,
        ),
    ) {
        let spans: Vec<BufferSpan> =
            spans.into_iter().map(|(tensor, addr, len, elem_bytes)| BufferSpan { tensor, addr, len, elem_bytes }).collect();
        if validate_buffers(&p, &spans).is_err() {
            return Ok(());
        }
        let end = |s: &BufferSpan| {
            u64::try_from(s.len).ok().and_then(|n| n.checked_mul(s.elem_bytes as u64)).and_then(|n| s.addr.checked_add(n))
        };
        for s in &spans {
            prop_assert!(s.len >= p.extent(s.tensor));
            prop_assert!(p.extent(s.tensor) == 0 || s.addr % BUFFER_ALIGN == 0);
            prop_assert!(end(s).is_some());
        }
        for (i, a) in spans.iter().enumerate() {
            for (j, b) in spans.iter().enumerate() {
                let output = matches!(a.tensor, TensorName::O | TensorName::Lse);
                let (Some(a_end), Some(b_end)) = (end(a), end(b)) else { continue };
                let overlap = a.len > 0 && b.len > 0 && a.addr < b_end && b.addr < a_end;
                prop_assert!(i == j || !output || !overlap, "{:?} overlaps {:?}", a, b);
            }
        }
    }
}

// ---- kernel configurations ----

/// What a config that passes `KernelSpec::validate` promises the launch: threads a block may
/// have, shared memory the arch gives, a name and defines the compile can use, TMA boxes the
/// driver takes.
fn assert_spec_fits(spec: &KernelSpec, arch: Arch) -> Result<(), TestCaseError> {
    let threads = spec.threads();
    prop_assert!((32..=1024).contains(&threads) && threads.is_multiple_of(32), "{} threads", threads);
    prop_assert!(spec.dynamic_smem_bytes() <= arch.max_smem_per_block());
    let name = spec.name();
    let prefix = format!("evoattn_{}_{}_d{}", spec.imp().symbol(), spec.dtype, spec.head_dim);
    prop_assert!(name.starts_with(&prefix), "{}", name);
    prop_assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{}", name);
    let defines = spec.defines();
    prop_assert!(defines.contains(&("EVOATTN_KERNEL_NAME".to_string(), name.clone())));
    for (i, (define, value)) in defines.iter().enumerate() {
        prop_assert!(define.starts_with("EVOATTN_") && !value.is_empty(), "{define}={value}");
        prop_assert!(defines[..i].iter().all(|(other, _)| other != define), "{define} twice");
    }
    if let Some(rows) = spec.tensor_map_rows() {
        for r in [rows.q, Some(rows.kv), rows.o].into_iter().flatten() {
            prop_assert!((1..=MAX_BOX_ROWS).contains(&r), "a TMA box of {r} rows");
        }
    }
    Ok(())
}

/// Lever names `--config` may write for family `C`: its levers and the retired ones.
fn lever_names<C: Family>() -> Vec<String> {
    C::LEVERS.iter().map(|l| l.name.to_string()).chain(C::RETIRED.iter().map(|r| r.key.to_string())).collect()
}

/// Values a lever of `C` may be given: every lever's tuning values and names, 0 and 1.
fn lever_values<C: Family>() -> Vec<String> {
    let mut values = vec!["0".to_string(), "1".to_string()];
    for lever in C::LEVERS {
        values.extend(lever.tuning_values());
        if let Kind::Choice { names, .. } = &lever.kind {
            values.extend(names.iter().map(|n| n.to_string()));
        }
    }
    values.extend(C::RETIRED.iter().flat_map(|r| r.names.iter().map(|n| n.to_string())));
    values.sort();
    values.dedup();
    values
}

/// `--config` text for family `C`: arbitrary text, or items of its levers (and some others)
/// with values it takes, numbers of any size, names in other cases, and junk.
fn config_text<C: Family>() -> BoxedStrategy<String> {
    let key = prop_oneof![
        6 => select(lever_names::<C>()),
        1 => select(lever_names::<MmaConfig>()),
        1 => select(lever_names::<WgmmaConfig>()),
        1 => "[a-z_]{0,12}",
    ];
    let value = prop_oneof![
        6 => select(lever_values::<C>()),
        2 => any::<u32>().prop_map(|n| n.to_string()),
        1 => select(lever_values::<C>()).prop_map(|v| v.to_uppercase()),
        1 => select(vec!["true", "false", "-1", "", "+7", "4294967296", "1.5", "0x10", " ", "on"]).prop_map(str::to_string),
        1 => ".{0,6}",
    ];
    let item = prop_oneof![
        8 => (key, value, select(vec!["", " "]), select(vec!["", " "]))
            .prop_map(|(k, v, a, b)| format!("{a}{k}{b}={a}{v}{b}")),
        1 => "[a-z_=]{0,10}",
    ];
    prop_oneof![
        1 => ".*",
        6 => (prop::collection::vec(item, 0..=8), select(vec![",", ", ", ",,"])).prop_map(|(items, sep)| items.join(sep)),
    ]
    .boxed()
}

/// `--config` text applied to a family's default: a config of the same family that reads back
/// from its own rendering (from any default of the family), or a message. A config that passes
/// `validate` on an arch fits it ([`assert_spec_fits`]); one that does not says why.
fn check_config_text(imp: Impl, text: &str, arch: Arch, head_dim: usize) -> Result<(), TestCaseError> {
    let base = imp.default_config(arch, imp.dtypes()[0], head_dim);
    let config = match base.with_overrides(text) {
        Ok(config) => config,
        Err(e) => {
            prop_assert!(!e.is_empty());
            return Ok(());
        }
    };
    prop_assert_eq!(config.imp(), imp);
    let shown = config.to_string();
    prop_assert_eq!(base.with_overrides(&shown), Ok(config), "'{}' from '{}'", shown, text);
    let other = imp.default_config(imp.archs()[0], imp.dtypes()[0], imp.head_dims()[0]);
    prop_assert_eq!(other.with_overrides(&shown), Ok(config), "'{}' from another default", shown);
    for (key, value) in config.levers() {
        prop_assert_eq!(config.with_overrides(&format!("{key}={value}")), Ok(config));
    }
    for arch in Arch::ALL {
        for dtype in Dtype::ALL {
            for head_dim in [head_dim, 64, 128, 256] {
                let spec = KernelSpec { config, dtype, head_dim };
                match spec.validate(arch) {
                    Ok(()) => assert_spec_fits(&spec, arch)?,
                    Err(e) => prop_assert!(!e.is_empty()),
                }
            }
        }
    }
    Ok(())
}

/// An arch a family compiles for, and a head dim: mostly one it is built for.
fn arch_and_head_dim() -> impl Strategy<Value = (usize, usize)> {
    (0usize..8, prop_oneof![3 => select(vec![64usize, 128, 256]), 1 => head_dim()])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn reference_config_text_parses_or_errs(text in config_text::<ReferenceConfig>(), (a, d) in arch_and_head_dim()) {
        check_config_text(Impl::Reference, &text, Impl::Reference.archs()[a % Impl::Reference.archs().len()], d)?;
    }

    #[test]
    fn mma_config_text_parses_or_errs(text in config_text::<MmaConfig>(), (a, d) in arch_and_head_dim()) {
        check_config_text(Impl::Mma, &text, Impl::Mma.archs()[a % Impl::Mma.archs().len()], d)?;
    }

    #[test]
    fn wgmma_config_text_parses_or_errs(text in config_text::<WgmmaConfig>(), (a, d) in arch_and_head_dim()) {
        check_config_text(Impl::Wgmma, &text, Impl::Wgmma.archs()[a % Impl::Wgmma.archs().len()], d)?;
    }

    #[test]
    fn splitkv_config_text_parses_or_errs(text in config_text::<SplitkvConfig>(), (a, d) in arch_and_head_dim()) {
        check_config_text(Impl::Splitkv, &text, Impl::Splitkv.archs()[a % Impl::Splitkv.archs().len()], d)?;
    }

    /// Any family's config, as `Request::Config` runs it on any valid problem: validate, then
    /// the launch's needs, never a panic.
    #[test]
    fn any_config_on_any_valid_problem_validates_or_errs(
        text in prop_oneof![
            config_text::<ReferenceConfig>().prop_map(|t| (Impl::Reference, t)),
            config_text::<MmaConfig>().prop_map(|t| (Impl::Mma, t)),
            config_text::<WgmmaConfig>().prop_map(|t| (Impl::Wgmma, t)),
            config_text::<SplitkvConfig>().prop_map(|t| (Impl::Splitkv, t)),
        ],
        p in near_valid_problem(300),
        arch in select(Arch::ALL.to_vec()),
        sm_count in 1u32..=264,
    ) {
        let (imp, text) = text;
        let Ok(config) = imp.default_config(arch, p.dtype, p.shape.d).with_overrides(&text) else { return Ok(()) };
        if p.validate().is_err() {
            return Ok(());
        }
        let planned = plan(&p, arch, sm_count, Request::Config(config));
        prop_assert_eq!(planned.spec.config, config);
        if planned.spec.validate(arch).is_ok() {
            assert_spec_fits(&planned.spec, arch)?;
            if let Ok(needs) = planned.spec.launch_needs(&p, sm_count, 1) {
                let grid = planned.spec.grid(&p.shape, needs.splits, sm_count);
                prop_assert!(grid.iter().try_fold(1usize, |n, &g| n.checked_mul(g)).is_some(), "grid {grid:?}");
            }
        }
    }
}

/// Share of `n` values of `strategy` (drawn deterministically) that `accepted` accepts.
fn share<T: std::fmt::Debug>(strategy: BoxedStrategy<T>, n: usize, accepted: impl Fn(&T) -> bool) -> f64 {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let hits = (0..n).filter(|_| accepted(&strategy.new_tree(&mut runner).expect("a value").current())).count();
    hits as f64 / n as f64
}

/// The strategies reach both verdicts of each validator often enough that the properties test
/// something: were every generated problem or config refused, they would pass vacuously.
#[test]
fn the_strategies_reach_both_verdicts() {
    const N: usize = 1000;
    let valid = |p: &Problem| p.validate().is_ok();
    let shares = [
        ("any problem", share(problem(), N, valid)),
        ("tiny problem", share(near_valid_problem(4), N, valid)),
        ("large problem", share(near_valid_problem(70000), N, valid)),
        (
            "planned kernel",
            share(near_valid_problem(70000), N, |p| {
                valid(p) && plan(p, Arch::Sm90a, 132, Request::Auto).spec.validate(Arch::Sm90a).is_ok()
            }),
        ),
        (
            "mma text",
            share(config_text::<MmaConfig>(), N, |t| {
                Impl::Mma.default_config(Arch::Sm80, Dtype::F16, 64).with_overrides(t).is_ok()
            }),
        ),
        (
            "valid wgmma text",
            share(config_text::<WgmmaConfig>(), N, |t| {
                let base = Impl::Wgmma.default_config(Arch::Sm90a, Dtype::F16, 128);
                base.with_overrides(t).is_ok_and(|config| {
                    KernelSpec { config, dtype: Dtype::F16, head_dim: 128 }.validate(Arch::Sm90a).is_ok()
                })
            }),
        ),
    ];
    for (what, share) in shares {
        assert!((0.05..=0.95).contains(&share), "{what}: {share} accepted");
    }
    let base = Impl::Wgmma.default_config(Arch::Sm90a, Dtype::F16, 128);
    let bad = base.with_overrides("block_n=4294967295,stages=0").expect("any u32 parses");
    assert!(matches!(bad, KernelConfig::Wgmma(_)));
    assert!(KernelSpec { config: bad, dtype: Dtype::F16, head_dim: 128 }.validate(Arch::Sm90a).is_err());
}
