//! The attention problem: shapes, dtype, mask, scale and per-tensor strides, and the one
//! `validate()` that every launch path runs before touching the GPU.

use crate::error::ProblemError;
use std::fmt;

/// Element type of Q, K and V; O's is [`Dtype::output`]. Accumulation is always float32.
///
/// Host code holds elements of every dtype as raw bits in `u16` (an E4M3 byte in the low
/// half), so that one buffer type serves the reference, the mock and the file readers; device
/// buffers hold [`Dtype::size_bytes`] a element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    F16,
    Bf16,
    /// FP8 E4M3 ([`crate::fp8`]): inputs dequantized by one float32 descale per (batch, KV
    /// head) and tensor; O in bf16, FlashAttention-3's choice.
    E4m3,
    /// E4M3 inputs as [`Dtype::E4m3`], O in f16 (on request: f16's 10-bit mantissa keeps 3
    /// more bits of O than bf16's 7, where O's range fits f16's).
    E4m3F16,
}

impl Dtype {
    pub const ALL: [Dtype; 4] = [Dtype::F16, Dtype::Bf16, Dtype::E4m3, Dtype::E4m3F16];
    /// The 16-bit dtypes, whose O has the inputs' dtype and no descales.
    pub const SIXTEEN_BIT: [Dtype; 2] = [Dtype::F16, Dtype::Bf16];

    pub fn size_bytes(self) -> usize {
        match self {
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::E4m3 | Dtype::E4m3F16 => 1,
        }
    }

    /// The dtype of O for inputs of this dtype.
    pub fn output(self) -> Dtype {
        match self {
            Dtype::E4m3 => Dtype::Bf16,
            Dtype::E4m3F16 => Dtype::F16,
            d => d,
        }
    }

    /// The dtype of these inputs with O in `out`: E4M3 inputs take bf16 or f16; 16-bit inputs
    /// only their own dtype. The error says what may be asked.
    pub fn with_output(self, out: Dtype) -> Result<Dtype, String> {
        match (self.element(), out) {
            (Dtype::E4m3, Dtype::Bf16) => Ok(Dtype::E4m3),
            (Dtype::E4m3, Dtype::F16) => Ok(Dtype::E4m3F16),
            (Dtype::E4m3, _) => Err(format!("O of E4M3 inputs is bf16 or f16, not {out}")),
            (d, o) if d == o => Ok(d),
            (d, _) => Err(format!("O of {d} inputs is {d}; only E4M3 inputs choose O's dtype (bf16 or f16)")),
        }
    }

    /// True for E4M3 inputs (either O), which come with descales.
    pub fn is_fp8(self) -> bool {
        matches!(self, Dtype::E4m3 | Dtype::E4m3F16)
    }

    /// The dtype of the inputs' elements: E4M3 for both FP8 dtypes.
    pub fn element(self) -> Dtype {
        match self {
            Dtype::E4m3F16 => Dtype::E4m3,
            d => d,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::E4m3 => "e4m3",
            Dtype::E4m3F16 => "e4m3f16",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "f16" | "fp16" | "half" | "float16" => Some(Dtype::F16),
            "bf16" | "bfloat16" => Some(Dtype::Bf16),
            "e4m3" | "fp8" | "fp8_e4m3" | "float8_e4m3fn" => Some(Dtype::E4m3),
            "e4m3f16" | "e4m3-f16" => Some(Dtype::E4m3F16),
            _ => None,
        }
    }

    /// Rounds an f64 to this dtype and back (what storing a value in a tensor does).
    pub fn round(self, x: f64) -> f64 {
        self.from_bits(self.to_bits(x))
    }

    /// `x` rounded to this dtype, as raw bits. E4M3 rounds through float32 (the GPU's `cvt`
    /// takes a float32), saturating past ±448.
    pub fn to_bits(self, x: f64) -> u16 {
        match self {
            Dtype::F16 => half::f16::from_f64(x).to_bits(),
            Dtype::Bf16 => half::bf16::from_f64(x).to_bits(),
            Dtype::E4m3 | Dtype::E4m3F16 => u16::from(crate::fp8::e4m3_from_f32(x as f32)),
        }
    }

    /// `x` rounded to nearest even, as the GPU's `cvt.rn` rounds a float32.
    pub fn bits_from_f32(self, x: f32) -> u16 {
        match self {
            Dtype::F16 => half::f16::from_f32(x).to_bits(),
            Dtype::Bf16 => half::bf16::from_f32(x).to_bits(),
            Dtype::E4m3 | Dtype::E4m3F16 => u16::from(crate::fp8::e4m3_from_f32(x)),
        }
    }

    pub fn from_bits(self, bits: u16) -> f64 {
        match self {
            Dtype::F16 => half::f16::from_bits(bits).to_f64(),
            Dtype::Bf16 => half::bf16::from_bits(bits).to_f64(),
            // The low byte; the high one is ignored.
            Dtype::E4m3 | Dtype::E4m3F16 => f64::from(crate::fp8::e4m3_to_f32(bits as u8)),
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which keys a query may see.
///
/// Query row `i` may attend key `j` iff `j <= i + offset`, where the offset is 0 for
/// `TopLeft` (PyTorch `is_causal=True`) and `Sk - Sq` for `BottomRight` (FlashAttention and
/// KV-cache decoding). A row that may see no key at all gets O = 0 and LSE = -inf.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Causal {
    None,
    TopLeft,
    BottomRight,
}

impl Causal {
    pub const ALL: [Causal; 3] = [Causal::None, Causal::TopLeft, Causal::BottomRight];

    pub fn name(self) -> &'static str {
        match self {
            Causal::None => "none",
            Causal::TopLeft => "top-left",
            Causal::BottomRight => "bottom-right",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "no" | "false" => Some(Causal::None),
            "top-left" | "topleft" | "true" => Some(Causal::TopLeft),
            "bottom-right" | "bottomright" => Some(Causal::BottomRight),
            _ => None,
        }
    }

    /// The diagonal offset: key `j` is visible to query `i` iff `j <= i + offset`.
    /// `None` for no mask. Exact for sizes below 2^63 (every problem `validate` accepts);
    /// saturating beyond.
    pub fn offset(self, sq: usize, sk: usize) -> Option<i64> {
        let signed = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        match self {
            Causal::None => None,
            Causal::TopLeft => Some(0),
            Causal::BottomRight => Some(signed(sk).saturating_sub(signed(sq))),
        }
    }

    /// Value passed to the kernels' `causal` parameter.
    pub fn code(self) -> i32 {
        match self {
            Causal::None => 0,
            Causal::TopLeft => 1,
            Causal::BottomRight => 2,
        }
    }
}

impl fmt::Display for Causal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Memory order of a dense 4-D tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `[B, H, S, D]`
    Bhsd,
    /// `[B, S, H, D]`
    Bshd,
}

impl Layout {
    pub const ALL: [Layout; 2] = [Layout::Bhsd, Layout::Bshd];

    pub fn name(self) -> &'static str {
        match self {
            Layout::Bhsd => "bhsd",
            Layout::Bshd => "bshd",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "bhsd" => Some(Layout::Bhsd),
            "bshd" => Some(Layout::Bshd),
            _ => None,
        }
    }

    /// Dims of a tensor with `heads` heads and `seq` rows in this layout.
    pub fn dims(self, b: usize, heads: usize, seq: usize, d: usize) -> [usize; 4] {
        match self {
            Layout::Bhsd => [b, heads, seq, d],
            Layout::Bshd => [b, seq, heads, d],
        }
    }

    /// Dense strides (in elements) for a tensor of `heads` heads and `seq` rows. A stride too
    /// large to count saturates at `usize::MAX` instead of wrapping, so that
    /// [`Problem::validate`] sees the extent it spans as too large.
    pub fn strides(self, heads: usize, seq: usize, d: usize) -> Strides {
        let mul = usize::saturating_mul;
        match self {
            Layout::Bhsd => Strides { batch: mul(mul(heads, seq), d), head: mul(seq, d), seq: d, dim: 1 },
            Layout::Bshd => Strides { batch: mul(mul(seq, heads), d), head: d, seq: mul(heads, d), dim: 1 },
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Strides of a 4-D tensor in elements, named by the logical axis they step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Strides {
    pub batch: usize,
    pub head: usize,
    pub seq: usize,
    pub dim: usize,
}

impl Strides {
    /// A dense Vᵀ, [B, Hkv, D, row] with keys contiguous: `row` elements between head-dim rows
    /// (Sk, or Sk padded to whole vectors).
    pub fn keys_contiguous(hkv: usize, d: usize, row: usize) -> Self {
        Strides { batch: hkv.saturating_mul(d).saturating_mul(row), head: d.saturating_mul(row), seq: 1, dim: row }
    }
}

/// The logical sizes of an attention problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub b: usize,
    /// Query (and output) heads.
    pub h: usize,
    /// Key/value heads; divides `h` (GQA when smaller, MQA when 1).
    pub hkv: usize,
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
}

/// Tokens (B·S) of every shape of docs/anchors.md's fa3 grid.
pub const FA3_TOKENS: usize = 16 * 1024;
/// Model width (H·D) of every shape of the fa3 grid.
pub const FA3_WIDTH: usize = 2048;
/// Sequence lengths of the fa3 grid.
pub const FA3_LENGTHS: [usize; 6] = [512, 1024, 2048, 4096, 8192, 16384];

impl Shape {
    /// Self-attention shape: Hkv = H, Sk = Sq.
    pub fn new(b: usize, h: usize, s: usize, d: usize) -> Self {
        Shape { b, h, hkv: h, sq: s, sk: s, d }
    }

    /// The fa3 grid's shapes of head dim `d`, shortest first.
    pub fn fa3_grid(d: usize) -> impl Iterator<Item = Shape> {
        FA3_LENGTHS.into_iter().map(move |s| Shape::new(FA3_TOKENS / s, FA3_WIDTH / d, s, d))
    }

    /// Parses `B,H,S,D[,HKV][,SK]`, the command line's shape syntax.
    pub fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        if !(4..=6).contains(&fields.len()) {
            return Err(format!("shape '{text}': expected B,H,S,D[,HKV][,SK] (4 to 6 numbers)"));
        }
        let mut nums = Vec::with_capacity(fields.len());
        for f in &fields {
            nums.push(f.parse::<usize>().map_err(|_| format!("shape '{text}': '{f}' is not a non-negative integer"))?);
        }
        let mut shape = Shape::new(nums[0], nums[1], nums[2], nums[3]);
        if let Some(&hkv) = nums.get(4) {
            shape.hkv = hkv;
        }
        if let Some(&sk) = nums.get(5) {
            shape.sk = sk;
        }
        Ok(shape)
    }
}

impl Shape {
    /// Query heads that share one KV head (0 when Hkv is 0, which `validate` rejects).
    pub fn group(&self) -> usize {
        self.h.checked_div(self.hkv).unwrap_or(0)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{},{}", self.b, self.h, self.sq, self.d)?;
        if self.hkv != self.h || self.sk != self.sq {
            write!(f, ",{}", self.hkv)?;
        }
        if self.sk != self.sq {
            write!(f, ",{}", self.sk)?;
        }
        Ok(())
    }
}

/// Which tensor an error or a stride refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorName {
    Q,
    K,
    V,
    O,
    Lse,
    /// An FP8 problem's descales: float32 `[3, B, Hkv]` dense, q's then k's then v's
    /// ([`crate::fp8::Descales`]); no elements for a 16-bit problem.
    Descale,
    /// The backward pass's gradients: dO (the loss's gradient of O, as O is laid out) in, dQ,
    /// dK and dV (laid out as Q, K and V) out.
    DO,
    DQ,
    DK,
    DV,
}

impl TensorName {
    pub const QKVO: [TensorName; 4] = [TensorName::Q, TensorName::K, TensorName::V, TensorName::O];

    pub fn name(self) -> &'static str {
        match self {
            TensorName::Q => "q",
            TensorName::K => "k",
            TensorName::V => "v",
            TensorName::O => "o",
            TensorName::Lse => "lse",
            TensorName::Descale => "descale",
            TensorName::DO => "do",
            TensorName::DQ => "dq",
            TensorName::DK => "dk",
            TensorName::DV => "dv",
        }
    }
}

impl fmt::Display for TensorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Largest element offset the kernels index with 32-bit arithmetic, and the largest size
/// (B, H, Hkv, Sq, Sk) they take: sizes are passed as 32-bit `int`s.
pub const MAX_INDEX: usize = i32::MAX as usize;

/// Bytes of the kernels' vector accesses; every row stride is a multiple of it.
pub const VECTOR_BYTES: usize = 16;

/// 16-bit elements per 16-byte vector access ([`Problem::vector_elems`] for any tensor).
pub const VECTOR_ELEMS: usize = 8;

/// A tensor as a caller holds it (a PyTorch view, say): sizes and strides in elements, in a
/// layout's axis order.
#[derive(Clone, Copy, Debug)]
pub struct StridedTensor<'a> {
    pub sizes: &'a [usize],
    pub strides: &'a [usize],
}

/// The axis names of tensor `t` in `layout`, for shape errors.
pub fn axis_names(layout: Layout, t: TensorName) -> &'static str {
    match (layout, t) {
        (Layout::Bhsd, TensorName::Q | TensorName::O) => "B, H, Sq, D",
        (Layout::Bhsd, _) => "B, Hkv, Sk, D",
        (Layout::Bshd, TensorName::Q | TensorName::O) => "B, Sq, H, D",
        (Layout::Bshd, _) => "B, Sk, Hkv, D",
    }
}

/// A full attention problem, as the kernels see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub shape: Shape,
    pub dtype: Dtype,
    pub causal: Causal,
    /// Softmax scale; `None` means 1/sqrt(D).
    pub scale: Option<f32>,
    pub q_strides: Strides,
    pub k_strides: Strides,
    pub v_strides: Strides,
    pub o_strides: Strides,
    /// Also write the natural-log log-sum-exp of each row, `[B, H, Sq]` float32, dense.
    pub with_lse: bool,
}

impl Problem {
    /// A problem on dense tensors in `layout`, no mask, default scale, no LSE.
    pub fn dense(shape: Shape, dtype: Dtype, layout: Layout) -> Self {
        let Shape { h, hkv, sq, sk, d, .. } = shape;
        Problem {
            shape,
            dtype,
            causal: Causal::None,
            scale: None,
            q_strides: layout.strides(h, sq, d),
            k_strides: layout.strides(hkv, sk, d),
            v_strides: layout.strides(hkv, sk, d),
            o_strides: layout.strides(h, sq, d),
            with_lse: false,
        }
    }

    /// The problem over q, k, v and o given as strided tensors in `layout`'s axis order (any
    /// strides: a transposed view, a slice of a larger buffer), no mask, default scale, no LSE.
    /// k and v must agree with q on B and D and with each other; o must have q's sizes. The
    /// strides themselves are checked by [`Problem::validate`].
    pub fn from_strided(
        layout: Layout,
        dtype: Dtype,
        [q, k, v, o]: [StridedTensor<'_>; 4],
    ) -> Result<Self, ProblemError> {
        let tensors = [(TensorName::Q, q), (TensorName::K, k), (TensorName::V, v), (TensorName::O, o)];
        for (t, view) in tensors {
            for dims in [view.sizes, view.strides] {
                if dims.len() != 4 {
                    let expected = axis_names(layout, t);
                    return Err(ProblemError::WrongRank { tensor: t, expected, got: dims.to_vec() });
                }
            }
        }
        // [b, heads, rows, d] and their strides from `layout`'s order.
        let logical = |x: &[usize]| match layout {
            Layout::Bhsd => [x[0], x[1], x[2], x[3]],
            Layout::Bshd => [x[0], x[2], x[1], x[3]],
        };
        let [b, h, sq, d] = logical(q.sizes);
        let [_, hkv, sk, _] = logical(k.sizes);
        let expect = [(TensorName::K, layout.dims(b, hkv, sk, d)), (TensorName::V, layout.dims(b, hkv, sk, d))];
        for ((t, expected), view) in
            expect.into_iter().chain([(TensorName::O, layout.dims(b, h, sq, d))]).zip([k, v, o])
        {
            if view.sizes != expected {
                return Err(ProblemError::ShapeMismatch {
                    tensor: t,
                    expected: expected.to_vec(),
                    got: view.sizes.to_vec(),
                });
            }
        }
        let strides = |view: StridedTensor<'_>| {
            let [batch, head, seq, dim] = logical(view.strides);
            Strides { batch, head, seq, dim }
        };
        Ok(Problem {
            shape: Shape { b, h, hkv, sq, sk, d },
            dtype,
            causal: Causal::None,
            scale: None,
            q_strides: strides(q),
            k_strides: strides(k),
            v_strides: strides(v),
            o_strides: strides(o),
            with_lse: false,
        })
    }

    pub fn with_causal(mut self, causal: Causal) -> Self {
        self.causal = causal;
        self
    }

    pub fn with_scale(mut self, scale: Option<f32>) -> Self {
        self.scale = scale;
        self
    }

    pub fn with_lse(mut self, with_lse: bool) -> Self {
        self.with_lse = with_lse;
        self
    }

    /// V is given keys-contiguous, as Vᵀ ([B, Hkv, D, Sk]: a seq stride of 1 and a head-dim
    /// stride other than 1), which E4M3's P·V reads as it is (FP8 `wgmma` takes V K-major);
    /// only E4M3 problems may hold V so ([`Problem::validate`]).
    pub fn v_keys_contiguous(&self) -> bool {
        self.dtype.is_fp8() && self.v_strides.seq == 1 && self.v_strides.dim != 1
    }

    /// The same problem with V held dense as Vᵀ, [B, Hkv, D, Sk'] with Sk' = Sk rounded up to
    /// whole 16-byte vectors (the keys past Sk a gap), as `--v-layout bhds` draws it.
    pub fn with_v_keys_contiguous(mut self) -> Self {
        let s = self.shape;
        let keys = s.sk.div_ceil(self.vector_elems(TensorName::V)) * self.vector_elems(TensorName::V);
        self.v_strides = Strides::keys_contiguous(s.hkv, s.d, keys.max(1));
        self
    }

    /// The same problem with V held dense in `layout`'s rows: what a reference or a peer that
    /// takes V so computes a problem with V given keys-contiguous on (the logical V, and so O,
    /// are the same).
    pub fn with_v_dense(mut self, layout: Layout) -> Self {
        self.v_strides = layout.strides(self.shape.hkv, self.shape.sk, self.shape.d);
        self
    }

    /// The scale actually applied to Q·Kᵀ.
    pub fn softmax_scale(&self) -> f32 {
        self.scale.unwrap_or_else(|| 1.0 / (self.shape.d as f32).sqrt())
    }

    pub fn strides(&self, t: TensorName) -> Strides {
        match t {
            TensorName::Q => self.q_strides,
            TensorName::K => self.k_strides,
            TensorName::V => self.v_strides,
            TensorName::O | TensorName::DO => self.o_strides,
            TensorName::DQ => self.q_strides,
            TensorName::DK => self.k_strides,
            TensorName::DV => self.v_strides,
            TensorName::Lse => {
                Strides { batch: self.shape.h.saturating_mul(self.shape.sq), head: self.shape.sq, seq: 1, dim: 1 }
            }
            TensorName::Descale => {
                Strides { batch: self.shape.b.saturating_mul(self.shape.hkv), head: self.shape.hkv, seq: 1, dim: 1 }
            }
        }
    }

    /// Bytes of one element of tensor `t`: the input dtype's for Q, K and V, its output's for
    /// O, 4 (float32) for LSE and descales.
    pub fn elem_bytes(&self, t: TensorName) -> usize {
        match t {
            TensorName::Q | TensorName::K | TensorName::V => self.dtype.size_bytes(),
            TensorName::DQ | TensorName::DK | TensorName::DV => self.dtype.size_bytes(),
            TensorName::O | TensorName::DO => self.dtype.output().size_bytes(),
            TensorName::Lse | TensorName::Descale => 4,
        }
    }

    /// The (batch, KV head) group, `b · Hkv + kv_head`, of logical row `row` of input `t` (rows
    /// counted in (b, h, s) order): the index of its descale. A query head's group is the KV
    /// head it reads.
    pub fn kv_group(&self, t: TensorName, row: usize) -> usize {
        let [_, nh, ns, _] = self.dims(t);
        let hkv = self.shape.hkv;
        (row / (nh * ns)) * hkv + (row / ns % nh) / (nh / hkv)
    }

    /// Elements of tensor `t` in one 16-byte vector, the unit its strides must be multiples of.
    pub fn vector_elems(&self, t: TensorName) -> usize {
        VECTOR_BYTES / self.elem_bytes(t)
    }

    /// Element offset of logical index `[b, h, s, d]` in tensor `t`'s buffer, by its strides
    /// (`h` counts KV heads for K and V; `d` is 0 for LSE).
    pub fn offset(&self, t: TensorName, b: usize, h: usize, s: usize, d: usize) -> usize {
        let st = self.strides(t);
        b * st.batch + h * st.head + s * st.seq + d * st.dim
    }

    /// Logical (batch, heads, rows, cols) of a tensor; (q/k/v, batch, KV head, 1) for the
    /// descales.
    pub fn dims(&self, t: TensorName) -> [usize; 4] {
        let s = self.shape;
        match t {
            TensorName::Q | TensorName::O | TensorName::DQ | TensorName::DO => [s.b, s.h, s.sq, s.d],
            TensorName::K | TensorName::V | TensorName::DK | TensorName::DV => [s.b, s.hkv, s.sk, s.d],
            TensorName::Lse => [s.b, s.h, s.sq, 1],
            // (tensor, batch, KV head, 1)
            TensorName::Descale => [if self.dtype.is_fp8() { 3 } else { 0 }, s.b, s.hkv, 1],
        }
    }

    /// Elements a buffer must hold for tensor `t`: largest offset + 1, or 0 when empty. Exact
    /// for a problem that [`validate`](Problem::validate) accepts (at most [`MAX_INDEX`]);
    /// `usize::MAX` for one whose extent does not fit a `usize`, never a wrapped value.
    pub fn extent(&self, t: TensorName) -> usize {
        self.checked_extent(t).unwrap_or(usize::MAX)
    }

    /// [`extent`](Problem::extent) in checked arithmetic: `None` when it does not fit a `usize`.
    pub fn checked_extent(&self, t: TensorName) -> Option<usize> {
        let dims = self.dims(t);
        if dims.contains(&0) {
            return Some(0);
        }
        let st = self.strides(t);
        let steps = [st.batch, st.head, st.seq, st.dim];
        dims.iter().zip(steps).try_fold(1usize, |end, (n, stride)| end.checked_add((n - 1).checked_mul(stride)?))
    }

    /// Logical elements of tensor `t` (B·H·S·D, or B·H·Sq for LSE), whatever its strides. Exact for
    /// a problem that [`validate`](Problem::validate) accepts; `usize::MAX` when the count does
    /// not fit a `usize`.
    pub fn elements(&self, t: TensorName) -> usize {
        self.checked_elements(t).unwrap_or(usize::MAX)
    }

    /// [`elements`](Problem::elements) in checked arithmetic: `None` when it does not fit a `usize`.
    pub fn checked_elements(&self, t: TensorName) -> Option<usize> {
        self.dims(t).into_iter().try_fold(1usize, usize::checked_mul)
    }

    /// True when there is no output element to write.
    pub fn is_empty(&self) -> bool {
        let s = self.shape;
        s.b == 0 || s.h == 0 || s.sq == 0
    }

    /// Matrix FLOPs by the FlashAttention convention: 4·B·H·Sq·Sk·D, counting only the
    /// visible (query, key) pairs under a causal mask; softmax not counted.
    pub fn flops(&self) -> f64 {
        let s = self.shape;
        4.0 * s.b as f64 * s.h as f64 * self.visible_pairs() as f64 * s.d as f64
    }

    /// Number of (query, key) pairs the mask lets through, per (batch, head). Exact for a
    /// problem that [`validate`](Problem::validate) accepts (its sizes are below 2^31), which
    /// it counts in closed form; saturates at `u64::MAX` beyond.
    pub fn visible_pairs(&self) -> u64 {
        let (sq, sk) = (self.shape.sq as u64, self.shape.sk as u64);
        match self.causal.offset(self.shape.sq, self.shape.sk) {
            None => sq.saturating_mul(sk),
            Some(off) => {
                // Row i sees clamp(i + off + 1, 0, sk) keys: none for the rows before `first`,
                // then one more per row until `full`, then sk for the rest.
                let (sq, sk, off) = (i128::from(sq), i128::from(sk), i128::from(off));
                let first = (-off).clamp(0, sq);
                let full = (sk - off - 1).clamp(first, sq);
                let ramp = |i: i128| i + off + 1;
                let ramp_sum = (full - first) * (ramp(first) + ramp(full - 1)) / 2;
                u64::try_from(ramp_sum + (sq - full) * sk).unwrap_or(u64::MAX)
            }
        }
    }

    /// Checks everything that can be checked without device pointers.
    pub fn validate(&self) -> Result<(), ProblemError> {
        let s = self.shape;
        // A row is whole 16-byte vectors: 8 16-bit elements, 16 E4M3 ones.
        let d_step = self.vector_elems(TensorName::Q);
        if s.d == 0 || s.d > crate::MAX_HEAD_DIM || !s.d.is_multiple_of(d_step) {
            return Err(ProblemError::UnsupportedHeadDim {
                d: s.d,
                expected: format!("a multiple of {d_step} up to {}", crate::MAX_HEAD_DIM),
            });
        }
        // The kernels take every size as a 32-bit int.
        for (axis, size) in [("B", s.b), ("H", s.h), ("Hkv", s.hkv), ("Sq", s.sq), ("Sk", s.sk)] {
            if size > MAX_INDEX {
                return Err(ProblemError::SizeTooLarge { axis, size });
            }
        }
        if s.hkv == 0 || !s.h.is_multiple_of(s.hkv) {
            return Err(ProblemError::HeadsNotDivisible { h: s.h, hkv: s.hkv });
        }
        if let Some(scale) = self.scale {
            if !scale.is_finite() || scale == 0.0 {
                return Err(ProblemError::BadScale(scale));
            }
        }
        for t in TensorName::QKVO {
            let st = self.strides(t);
            // A row of 16-byte vectors: the head dim's, or (E4M3's V given as Vᵀ) the keys'.
            let keys_contiguous = t == TensorName::V && self.v_keys_contiguous();
            if st.dim != 1 && !keys_contiguous {
                return Err(ProblemError::NonUnitInnerStride { tensor: t, stride: st.dim });
            }
            // Before the strides' alignment: a dense stride too large to count saturates, and
            // the extent, not the alignment of that saturated value, is what is wrong.
            self.check_extent(t)?;
            let outer = if keys_contiguous { ("dim", st.dim) } else { ("seq", st.seq) };
            for (axis, stride) in [("batch", st.batch), ("head", st.head), outer] {
                let elems = self.vector_elems(t);
                if !stride.is_multiple_of(elems) {
                    return Err(ProblemError::StrideNotAligned { tensor: t, axis, stride, elems });
                }
            }
        }
        self.check_extent(TensorName::Lse)?;
        // Inputs may repeat elements (a broadcast K or V has stride 0); the output may not.
        if self.overlaps_itself(TensorName::O) {
            return Err(ProblemError::SelfOverlap { tensor: TensorName::O, strides: self.o_strides });
        }
        // A broadcast input spans few elements but may hold more logical ones than a count holds.
        for t in [TensorName::Q, TensorName::K, TensorName::V] {
            if self.checked_elements(t).is_none() {
                return Err(ProblemError::TooManyElements { tensor: t, dims: self.dims(t).to_vec() });
            }
        }
        Ok(())
    }

    /// Tensor `t`'s extent fits the kernels' 32-bit indexing.
    fn check_extent(&self, t: TensorName) -> Result<(), ProblemError> {
        match self.checked_extent(t) {
            Some(extent) if extent <= MAX_INDEX => Ok(()),
            extent => Err(ProblemError::IndexOverflow { tensor: t, extent }),
        }
    }

    /// True when two logical elements of tensor `t` share an address: sorted by stride, some
    /// axis of more than one element steps by less than the span of the axes below it. An
    /// empty tensor has no elements to share one.
    pub fn overlaps_itself(&self, t: TensorName) -> bool {
        let dims = self.dims(t);
        if dims.contains(&0) {
            return false;
        }
        let st = self.strides(t);
        let mut axes: Vec<(usize, usize)> =
            dims.into_iter().zip([st.batch, st.head, st.seq, st.dim]).filter(|&(n, _)| n > 1).collect();
        axes.sort_by_key(|&(_, stride)| stride);
        let mut span = 1usize;
        for (n, stride) in axes {
            if stride < span {
                return true;
            }
            span = stride.saturating_mul(n - 1).saturating_add(span);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_group_is_the_batch_and_kv_head_a_row_reads() {
        // B=2, H=4 on Hkv=2, Sq=3, Sk=5: q rows run (b, h, s), k rows (b, kv_head, s).
        let p = Problem::dense(Shape { b: 2, h: 4, hkv: 2, sq: 3, sk: 5, d: 8 }, Dtype::F16, Layout::Bshd);
        let q: Vec<usize> = (0..24).map(|row| p.kv_group(TensorName::Q, row)).collect();
        assert_eq!(q, [[0; 6], [1; 6], [2; 6], [3; 6]].concat(), "query heads 0-1 read KV head 0, 2-3 head 1");
        let k: Vec<usize> = (0..20).map(|row| p.kv_group(TensorName::K, row)).collect();
        assert_eq!(k, [[0; 5], [1; 5], [2; 5], [3; 5]].concat());
    }

    #[test]
    fn e4m3_inputs_write_o_in_bf16_or_on_request_f16_and_16_bit_inputs_in_their_own_dtype() {
        assert_eq!(Dtype::E4m3.output(), Dtype::Bf16);
        assert_eq!(Dtype::E4m3F16.output(), Dtype::F16);
        assert_eq!(Dtype::E4m3.with_output(Dtype::F16), Ok(Dtype::E4m3F16));
        assert_eq!(Dtype::E4m3F16.with_output(Dtype::Bf16), Ok(Dtype::E4m3));
        assert!(Dtype::E4m3.with_output(Dtype::E4m3).unwrap_err().contains("bf16 or f16"));
        assert_eq!(Dtype::Bf16.with_output(Dtype::Bf16), Ok(Dtype::Bf16));
        assert!(Dtype::Bf16.with_output(Dtype::F16).unwrap_err().contains("only E4M3 inputs choose"));
        // Both FP8 dtypes hold the same E4M3 input bytes and descales.
        for d in [Dtype::E4m3, Dtype::E4m3F16] {
            assert!(d.is_fp8());
            assert_eq!((d.element(), d.size_bytes()), (Dtype::E4m3, 1));
            assert_eq!(d.to_bits(448.0), Dtype::E4m3.to_bits(448.0));
            assert_eq!(Dtype::parse(d.name()), Some(d));
        }
        assert_eq!(Dtype::parse("e4m3-f16"), Some(Dtype::E4m3F16));
    }

    #[test]
    fn dense_strides_match_layouts() {
        let shape = Shape { b: 2, h: 8, hkv: 2, sq: 100, sk: 40, d: 64 };
        let p = Problem::dense(shape, Dtype::F16, Layout::Bshd);
        // [B, S, H, D]: one step in S skips H*D elements.
        assert_eq!(p.q_strides, Strides { batch: 100 * 8 * 64, head: 64, seq: 8 * 64, dim: 1 });
        assert_eq!(p.k_strides, Strides { batch: 40 * 2 * 64, head: 64, seq: 2 * 64, dim: 1 });
        assert_eq!(p.extent(TensorName::Q), 2 * 100 * 8 * 64);
        let p = Problem::dense(shape, Dtype::F16, Layout::Bhsd);
        assert_eq!(p.k_strides, Strides { batch: 2 * 40 * 64, head: 40 * 64, seq: 64, dim: 1 });
        assert_eq!(p.extent(TensorName::V), 2 * 2 * 40 * 64);
    }

    #[test]
    fn offset_follows_each_tensors_strides() {
        let shape = Shape { b: 2, h: 4, hkv: 2, sq: 3, sk: 5, d: 8 };
        let p = Problem::dense(shape, Dtype::F16, Layout::Bshd);
        // q [B, Sq, H, D] = [2, 3, 4, 8]: (1, 2, 1, 5) -> ((1*3 + 1)*4 + 2)*8 + 5
        assert_eq!(p.offset(TensorName::Q, 1, 2, 1, 5), ((3 + 1) * 4 + 2) * 8 + 5);
        // k [B, Sk, Hkv, D] = [2, 5, 2, 8]: (1, 1, 4, 7) -> ((1*5 + 4)*2 + 1)*8 + 7
        assert_eq!(p.offset(TensorName::K, 1, 1, 4, 7), ((5 + 4) * 2 + 1) * 8 + 7);
        // lse is always dense [B, H, Sq]
        assert_eq!(p.offset(TensorName::Lse, 1, 3, 2, 0), (4 + 3) * 3 + 2);
        // the last logical element sits at extent - 1
        assert_eq!(p.offset(TensorName::V, 1, 1, 4, 7), p.extent(TensorName::V) - 1);
    }

    #[test]
    fn an_extent_too_large_to_count_saturates_instead_of_wrapping() {
        // 2^32 heads of 2^32 rows of 64: every dense stride above the head's wraps a usize.
        let p = Problem::dense(Shape::new(1, 1 << 32, 1 << 32, 64), Dtype::F16, Layout::Bhsd);
        assert_eq!(p.q_strides.batch, usize::MAX);
        assert_eq!((p.checked_extent(TensorName::Q), p.extent(TensorName::Q)), (None, usize::MAX));
        assert_eq!(p.checked_elements(TensorName::Q), None);
        assert_eq!(p.validate(), Err(ProblemError::SizeTooLarge { axis: "H", size: 1 << 32 }));
    }

    #[test]
    fn sizes_past_32_bits_are_refused_before_anything_counts_with_them() {
        // The two shapes: B and Sk of 2^64-1 (whose `1 + sum` once wrapped to an extent of 0).
        let p = Problem::dense(Shape::parse("18446744073709551615,1,1,64").unwrap(), Dtype::F16, Layout::Bhsd);
        assert_eq!(p.validate(), Err(ProblemError::SizeTooLarge { axis: "B", size: usize::MAX }));
        let p = Problem::dense(Shape::parse("1,1,1,64,1,18446744073709551615").unwrap(), Dtype::F16, Layout::Bhsd);
        let err = p.validate().unwrap_err();
        assert_eq!(err, ProblemError::SizeTooLarge { axis: "Sk", size: usize::MAX });
        assert_eq!(err.to_string(), "Sk=18446744073709551615 is too large: the kernels take sizes up to 2^31-1");
        // Each size fits, their product does not: Q spans 2^32 * 2^29 * 64 elements, past 2^64.
        let mut p = Problem::dense(Shape::new(1 << 30, 1 << 29, 1, 64), Dtype::F16, Layout::Bhsd);
        assert_eq!(p.validate(), Err(ProblemError::IndexOverflow { tensor: TensorName::Q, extent: None }));
        assert!(p.validate().unwrap_err().to_string().contains("spans more elements than 64-bit arithmetic counts"));
        // Past 2^31 but countable: the count is named.
        p.shape = Shape::new(1 << 20, 1, 1 << 20, 64);
        p = Problem::dense(p.shape, Dtype::F16, Layout::Bhsd);
        assert_eq!(p.validate(), Err(ProblemError::IndexOverflow { tensor: TensorName::Q, extent: Some(1 << 46) }));
    }

    #[test]
    fn a_broadcast_input_may_span_little_but_its_count_must_be_countable() {
        // K and V read one row for every (batch, head, key): stride 0 everywhere but D.
        let shape = Shape { b: 1, h: 1, hkv: 1, sq: 1, sk: MAX_INDEX, d: 64 };
        let mut p = Problem::dense(shape, Dtype::F16, Layout::Bhsd);
        p.k_strides = Strides { batch: 0, head: 0, seq: 0, dim: 1 };
        p.v_strides = p.k_strides;
        assert_eq!(p.validate(), Ok(()));
        assert_eq!((p.extent(TensorName::K), p.elements(TensorName::K)), (64, MAX_INDEX * 64));
        // 2^31-1 batches and KV heads too: 2^101 logical elements of K.
        p.shape = Shape { b: MAX_INDEX, h: MAX_INDEX, hkv: MAX_INDEX, sq: 0, sk: MAX_INDEX, d: 64 };
        let err = p.validate().unwrap_err();
        assert_eq!(
            err,
            ProblemError::TooManyElements { tensor: TensorName::K, dims: vec![MAX_INDEX, MAX_INDEX, MAX_INDEX, 64] }
        );
    }

    #[test]
    fn visible_pairs_in_closed_form_match_counting_row_by_row() {
        for causal in Causal::ALL {
            for (sq, sk) in [(0, 0), (0, 5), (5, 0), (1, 1), (4, 4), (2, 5), (5, 2), (7, 3), (3, 7), (100, 37)] {
                let p = Problem::dense(Shape { b: 1, h: 1, hkv: 1, sq, sk, d: 8 }, Dtype::F16, Layout::Bhsd)
                    .with_causal(causal);
                let by_rows: u64 = match causal.offset(sq, sk) {
                    None => (sq * sk) as u64,
                    Some(off) => (0..sq as i64).map(|i| (i + off + 1).clamp(0, sk as i64) as u64).sum(),
                };
                assert_eq!(p.visible_pairs(), by_rows, "{causal} sq={sq} sk={sk}");
            }
        }
    }

    #[test]
    fn parse_shape_forms() {
        assert_eq!(Shape::parse("1,8,512,64").unwrap(), Shape::new(1, 8, 512, 64));
        let s = Shape::parse("2, 32, 7, 128, 8, 1000").unwrap();
        assert_eq!(s, Shape { b: 2, h: 32, hkv: 8, sq: 7, sk: 1000, d: 128 });
        assert_eq!(s.to_string(), "2,32,7,128,8,1000");
        assert!(Shape::parse("1,2,3").is_err());
        assert!(Shape::parse("1,2,x,4").is_err());
    }

    #[test]
    fn flops_count_visible_pairs() {
        // 4 queries, 4 keys, top-left: 1+2+3+4 = 10 visible pairs.
        let p = Problem::dense(Shape::new(1, 1, 4, 8), Dtype::F16, Layout::Bhsd).with_causal(Causal::TopLeft);
        assert_eq!(p.visible_pairs(), 10);
        assert_eq!(p.flops(), 4.0 * 10.0 * 8.0);
        // Sq=2, Sk=5 bottom-right: offset 3, rows see 4 and 5 keys.
        let s = Shape { b: 1, h: 1, hkv: 1, sq: 2, sk: 5, d: 8 };
        let p = Problem::dense(s, Dtype::F16, Layout::Bhsd).with_causal(Causal::BottomRight);
        assert_eq!(p.visible_pairs(), 9);
        // Sq=5, Sk=2 bottom-right: offset -3, rows 0..2 see nothing, then 1, 2.
        let s = Shape { b: 1, h: 1, hkv: 1, sq: 5, sk: 2, d: 8 };
        let p = Problem::dense(s, Dtype::F16, Layout::Bhsd).with_causal(Causal::BottomRight);
        assert_eq!(p.visible_pairs(), 3);
    }

    #[test]
    fn a_problem_from_strided_views_takes_each_tensors_own_strides() {
        // q as a BHSD view of BSHD memory (what `q.transpose(1, 2)` of a [B, S, H, D] tensor is),
        // k and v dense BHSD with 2 KV heads, o dense.
        let q = StridedTensor { sizes: &[2, 8, 100, 64], strides: &[100 * 8 * 64, 64, 8 * 64, 1] };
        let kv = StridedTensor { sizes: &[2, 2, 300, 64], strides: &[2 * 300 * 64, 300 * 64, 64, 1] };
        let o = StridedTensor { sizes: &[2, 8, 100, 64], strides: &[8 * 100 * 64, 100 * 64, 64, 1] };
        let p = Problem::from_strided(Layout::Bhsd, Dtype::Bf16, [q, kv, kv, o]).unwrap();
        assert_eq!(p.shape, Shape { b: 2, h: 8, hkv: 2, sq: 100, sk: 300, d: 64 });
        assert_eq!(p.q_strides, Layout::Bshd.strides(8, 100, 64));
        assert_eq!(p.k_strides, Layout::Bhsd.strides(2, 300, 64));
        assert!(p.validate().is_ok());
        // The same memory described in BSHD order is the same problem.
        let q2 = StridedTensor { sizes: &[2, 100, 8, 64], strides: &[100 * 8 * 64, 8 * 64, 64, 1] };
        let kv2 = StridedTensor { sizes: &[2, 300, 2, 64], strides: &[2 * 300 * 64, 64, 300 * 64, 1] };
        let o2 = StridedTensor { sizes: &[2, 100, 8, 64], strides: &[8 * 100 * 64, 64, 100 * 64, 1] };
        assert_eq!(Problem::from_strided(Layout::Bshd, Dtype::Bf16, [q2, kv2, kv2, o2]).unwrap(), p);
    }

    #[test]
    fn e4m3_v_may_be_held_transposed_keys_contiguous_and_no_other_tensor_or_dtype_may() {
        // Vᵀ as a caller holds it, [B, Hkv, D, Sk] with Sk = 300 padded to 304, seen through
        // `vt.transpose(-1, -2)`: seq stride 1, head-dim stride 304.
        let shape = Shape { b: 2, h: 8, hkv: 2, sq: 100, sk: 300, d: 64 };
        let p = Problem::dense(shape, Dtype::E4m3, Layout::Bhsd).with_v_keys_contiguous();
        assert_eq!(p.v_strides, Strides { batch: 2 * 64 * 304, head: 64 * 304, seq: 1, dim: 304 });
        assert!(p.v_keys_contiguous() && p.validate().is_ok());
        let q = StridedTensor { sizes: &[2, 8, 100, 64], strides: &[8 * 100 * 64, 100 * 64, 64, 1] };
        let k = StridedTensor { sizes: &[2, 2, 300, 64], strides: &[2 * 300 * 64, 300 * 64, 64, 1] };
        let v = StridedTensor { sizes: &[2, 2, 300, 64], strides: &[2 * 64 * 304, 64 * 304, 1, 304] };
        assert_eq!(Problem::from_strided(Layout::Bhsd, Dtype::E4m3, [q, k, v, q]).unwrap(), p);
        // Back in rows: the logical V is the same, so is every other tensor.
        let rows = p.clone().with_v_dense(Layout::Bhsd);
        assert!(!rows.v_keys_contiguous() && rows == Problem::dense(shape, Dtype::E4m3, Layout::Bhsd));
        // The head-dim stride is then the row stride: whole 16-byte vectors of keys.
        let mut odd = p.clone();
        odd.v_strides.dim = 300;
        assert_eq!(
            odd.validate(),
            Err(ProblemError::StrideNotAligned { tensor: TensorName::V, axis: "dim", stride: 300, elems: 16 })
        );
        // 16-bit V, and any other tensor, keep the head dim contiguous.
        let mut sixteen = Problem::dense(shape, Dtype::Bf16, Layout::Bhsd);
        sixteen.v_strides = p.v_strides;
        assert!(!sixteen.v_keys_contiguous());
        assert_eq!(sixteen.validate(), Err(ProblemError::NonUnitInnerStride { tensor: TensorName::V, stride: 304 }));
        let mut k_t = Problem::dense(shape, Dtype::E4m3, Layout::Bhsd);
        k_t.k_strides = p.v_strides;
        assert_eq!(k_t.validate(), Err(ProblemError::NonUnitInnerStride { tensor: TensorName::K, stride: 304 }));
    }

    #[test]
    fn a_problem_from_strided_views_names_the_tensor_that_does_not_fit() {
        let t = |sizes: &'static [usize]| StridedTensor { sizes, strides: &[0, 0, 0, 1] };
        let q = t(&[2, 8, 100, 64]);
        let err = |k, v, o| Problem::from_strided(Layout::Bhsd, Dtype::F16, [q, k, v, o]).unwrap_err();
        assert_eq!(
            err(t(&[2, 8, 100]), q, q),
            ProblemError::WrongRank { tensor: TensorName::K, expected: "B, Hkv, Sk, D", got: vec![2, 8, 100] }
        );
        // v disagrees with k; k with q on the head dim; o with q.
        let e = err(t(&[2, 2, 50, 64]), t(&[2, 2, 51, 64]), q);
        assert_eq!(
            e,
            ProblemError::ShapeMismatch {
                tensor: TensorName::V,
                expected: vec![2, 2, 50, 64],
                got: vec![2, 2, 51, 64]
            }
        );
        let e = err(t(&[2, 2, 50, 32]), t(&[2, 2, 50, 32]), q);
        assert!(matches!(e, ProblemError::ShapeMismatch { tensor: TensorName::K, .. }), "{e}");
        let e = err(q, q, t(&[2, 8, 99, 64]));
        assert!(matches!(e, ProblemError::ShapeMismatch { tensor: TensorName::O, .. }), "{e}");
        let short = StridedTensor { sizes: &[2, 8, 100, 64], strides: &[1, 1, 1] };
        assert!(matches!(err(q, q, short), ProblemError::WrongRank { tensor: TensorName::O, .. }));
    }

    #[test]
    fn an_output_may_be_any_view_that_does_not_overlap_itself() {
        let shape = Shape { b: 2, h: 4, hkv: 2, sq: 16, sk: 16, d: 64 };
        let mut p = Problem::dense(shape, Dtype::F16, Layout::Bhsd);
        assert!(!p.overlaps_itself(TensorName::O));
        // BSHD memory viewed as BHSD (a transposed view) is still one element per address.
        p.o_strides = Layout::Bshd.strides(4, 16, 64);
        assert!(!p.overlaps_itself(TensorName::O) && p.validate().is_ok());
        // Padding between rows is fine; a batch stride of 0 or rows closer than D are not.
        p.o_strides = Strides { batch: 4 * 16 * 128, head: 16 * 128, seq: 128, dim: 1 };
        assert!(!p.overlaps_itself(TensorName::O));
        p.o_strides = Strides { batch: 0, head: 16 * 64, seq: 64, dim: 1 };
        assert_eq!(p.validate(), Err(ProblemError::SelfOverlap { tensor: TensorName::O, strides: p.o_strides }));
        p.o_strides = Strides { batch: 4 * 16 * 64, head: 16 * 64, seq: 56, dim: 1 };
        assert!(p.overlaps_itself(TensorName::O));
        // Inputs may broadcast: K and V with batch stride 0 are one KV set for every batch.
        let mut p = Problem::dense(shape, Dtype::F16, Layout::Bhsd);
        p.k_strides.batch = 0;
        p.v_strides.batch = 0;
        assert!(p.overlaps_itself(TensorName::K) && p.validate().is_ok());
        // An axis of one element steps nowhere, so its stride is free.
        let mut p = Problem::dense(Shape { b: 1, ..shape }, Dtype::F16, Layout::Bhsd);
        p.o_strides.batch = 8;
        assert!(!p.overlaps_itself(TensorName::O));
        // No rows: dense strides of 0 above the rows share no address, there being no element.
        let p = Problem::dense(Shape { sq: 0, ..shape }, Dtype::F16, Layout::Bhsd);
        assert_eq!((p.o_strides.batch, p.o_strides.head), (0, 0));
        assert!(!p.overlaps_itself(TensorName::O) && p.validate().is_ok());
    }

    #[test]
    fn default_scale_is_inverse_sqrt_d() {
        let p = Problem::dense(Shape::new(1, 1, 1, 64), Dtype::Bf16, Layout::Bhsd);
        assert_eq!(p.softmax_scale(), 0.125);
        assert_eq!(p.with_scale(Some(0.5)).softmax_scale(), 0.5);
    }
}
