//! `evoattn._evoattn`: the Rust side of the Python package. Tensors cross as device addresses
//! with sizes and strides (zero-copy), on the caller's CUDA stream handle; no libtorch symbol is
//! linked, so one abi3 wheel serves every PyTorch and Python >= 3.9. The Python layer
//! (`python/evoattn/`) reads those from torch tensors and allocates the outputs.

use evoattn::problem::{Causal, Dtype, Layout, StridedTensor, TensorName};
use evoattn::runtime::dlpack::{self, DlpackTensor, DEVICE_CPU, DEVICE_CUDA};
use evoattn::{Arch, Attention, BackwardBuffers, Error, ExternalTensors, Problem, ProblemError, Request};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};
use std::sync::Mutex;

pyo3::create_exception!(
    _evoattn,
    UnavailableError,
    PyRuntimeError,
    "This machine cannot run evoattn's kernels: no NVIDIA driver, no GPU, or no NVRTC (or, for the library paths, no cuBLAS or cuTENSOR)."
);

/// A library error as the Python exception a user expects: a bad argument is a `ValueError`
/// (a `TypeError` for a dtype), a machine that cannot run kernels an `UnavailableError`,
/// anything else (a compile or driver failure) a `RuntimeError`; the message is the library's.
fn to_py(err: Error) -> PyErr {
    let msg = format!("evoattn: {err}");
    match err {
        Error::Problem(ProblemError::UnsupportedDtype { .. } | ProblemError::DtypeMismatch { .. }) => {
            PyTypeError::new_err(msg)
        }
        Error::Problem(_) | Error::Unsupported { .. } => PyValueError::new_err(msg),
        e if e.is_environment() => UnavailableError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

fn problem_err(err: ProblemError) -> PyErr {
    to_py(Error::Problem(err))
}

fn value_err(msg: String) -> PyErr {
    PyValueError::new_err(format!("evoattn: {msg}"))
}

/// Sizes or strides of tensor `t` from a Python tuple (`torch.Size`, `Tensor.stride()`).
fn dims(t: TensorName, what: &str, tuple: &Bound<'_, PyTuple>) -> PyResult<Vec<usize>> {
    tuple
        .iter()
        .map(|item| {
            let n: i64 = item.extract()?;
            usize::try_from(n).map_err(|_| value_err(format!("tensor {t}: {what} {n} is negative")))
        })
        .collect()
}

/// The call's description, everything but the device addresses: what `check` validates without
/// a GPU and `Library.forward` launches.
struct Call {
    problem: Problem,
    request: Request,
    /// Lever overrides for a named impl, applied to the planner's config for the problem.
    config: Option<String>,
}

/// A described call on one `Library`'s GPU, ready to launch on any tensors of its sizes,
/// strides and dtypes: what the Python layer keeps per call signature so that a repeated call
/// crosses only its device addresses (describing a call costs a few microseconds of argument
/// conversion, as much as the launch itself).
#[pyclass(frozen)]
struct Prepared {
    problem: Problem,
    request: Request,
}

/// A tensor as the Python layer passes it: `(sizes, strides)` from `Tensor.shape` and
/// `Tensor.stride()`.
type Dims<'py> = (Bound<'py, PyTuple>, Bound<'py, PyTuple>);

/// A call's description as the Python layer passes it, positionally: layout, q, k, v, o, the
/// four dtypes' names, causal, scale, with_lse, impl, config.
#[derive(FromPyObject)]
struct CallArgs<'py>(
    String,
    Dims<'py>,
    Dims<'py>,
    Dims<'py>,
    Dims<'py>,
    [String; 4],
    String,
    Option<f64>,
    bool,
    String,
    Option<String>,
);

fn describe(args: &Bound<'_, PyTuple>) -> PyResult<Call> {
    let CallArgs(layout, q, k, v, o, dtypes, causal, scale, with_lse, imp, config) = args.extract()?;
    let names = [TensorName::Q, TensorName::K, TensorName::V, TensorName::O];
    let shapes = [(&q.0, &q.1), (&k.0, &k.1), (&v.0, &v.1), (&o.0, &o.1)];
    let mut owned: Vec<(Vec<usize>, Vec<usize>)> = Vec::with_capacity(4);
    for (t, (sizes, strides)) in names.into_iter().zip(shapes) {
        owned.push((dims(t, "size", sizes)?, dims(t, "stride", strides)?));
    }
    let tensors: [TensorDesc<'_>; 4] = std::array::from_fn(|i| TensorDesc {
        view: StridedTensor { sizes: &owned[i].0, strides: &owned[i].1 },
        dtype: dtypes[i].as_str(),
    });
    describe_parts(&layout, tensors, &causal, scale, with_lse, &imp, config)
}

/// One tensor of a call: its sizes and strides in the layout's axis order, and its dtype's name.
struct TensorDesc<'a> {
    view: StridedTensor<'a>,
    dtype: &'a str,
}

/// A call's description from its parts, validated: what `check`, `prepare` and `call` share.
fn describe_parts(
    layout: &str,
    tensors: [TensorDesc<'_>; 4],
    causal: &str,
    scale: Option<f64>,
    with_lse: bool,
    imp: &str,
    config: Option<String>,
) -> PyResult<Call> {
    let layout = Layout::parse(layout).ok_or_else(|| value_err(format!("unknown layout '{layout}'")))?;
    let names = [TensorName::Q, TensorName::K, TensorName::V, TensorName::O];
    let mut dtype = Dtype::parse(tensors[0].dtype).ok_or_else(|| {
        problem_err(ProblemError::UnsupportedDtype { tensor: TensorName::Q, got: tensors[0].dtype.into() })
    })?;
    // E4M3 inputs write O in the given O's dtype where it is one of theirs (bf16, or f16 on
    // request); any other O is refused below.
    if let Some(Ok(chosen)) = Dtype::parse(tensors[3].dtype).map(|o| dtype.with_output(o)) {
        dtype = chosen;
    }
    for (t, desc) in names.into_iter().zip(&tensors).skip(1) {
        // O is the output's dtype: q's, bf16 (or f16) for E4M3 inputs.
        let want = if t == TensorName::O { dtype.output() } else { dtype.element() };
        if Dtype::parse(desc.dtype) != Some(want) {
            let expected = match t {
                TensorName::O if dtype.is_fp8() => "bf16 or f16, the output dtypes of e4m3 inputs".to_string(),
                _ => format!("q's {}", dtype.element()),
            };
            return Err(problem_err(ProblemError::DtypeMismatch { tensor: t, expected, got: desc.dtype.into() }));
        }
    }
    let causal = Causal::parse(causal)
        .ok_or_else(|| value_err(format!("causal={causal:?}: expected False, True, 'top-left' or 'bottom-right'")))?;
    let scale = match scale {
        None => None,
        Some(s) if (s as f32).is_finite() && s as f32 != 0.0 => Some(s as f32),
        Some(s) => return Err(problem_err(ProblemError::BadScale(s as f32))),
    };
    let problem = Problem::from_strided(layout, dtype, tensors.map(|t| t.view))
        .map_err(problem_err)?
        .with_causal(causal)
        .with_scale(scale)
        .with_lse(with_lse);
    problem.validate().map_err(problem_err)?;
    let request = Request::parse(imp).map_err(value_err)?;
    let config = config.filter(|c| !c.is_empty());
    match (request, &config) {
        (Request::Auto, Some(_)) => {
            return Err(value_err("config= needs a named impl= (the levers belong to one kernel)".into()))
        }
        (Request::Family(imp), Some(text)) => {
            // The levers' names and values, against the kernel's default for this head dim on
            // its first arch; the per-GPU plan they apply to comes at the launch.
            evoattn::defaults::config(imp, imp.archs()[0], problem.dtype, problem.shape.d)
                .with_overrides(text)
                .map_err(value_err)?;
        }
        _ => {}
    }
    Ok(Call { problem, request, config })
}

/// A tensor exported by `torch._C._to_dlpack` (a `"dltensor"` capsule), copied out.
fn dlpack(name: TensorName, capsule: &Bound<'_, PyAny>) -> PyResult<DlpackTensor> {
    let capsule = capsule
        .cast::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err(format!("evoattn: tensor {name} must be a DLPack capsule")))?;
    let pointer = capsule.pointer_checked(Some(c"dltensor"))?;
    // Safety: a capsule named "dltensor" holds a live DLManagedTensor (the DLPack protocol),
    // owned by the capsule, which `capsule` keeps alive across the read.
    unsafe { dlpack::read(pointer.as_ptr()) }.map_err(|e| value_err(format!("tensor {name}: {e}")))
}

/// Validates a call's description (the arguments of `Library.prepare`) without a GPU: every
/// check made before a launch but the kernel's own limits on a GPU. Returns the problem's shape
/// `(B, H, Hkv, Sq, Sk, D)`.
#[pyfunction]
#[pyo3(signature = (*args))]
fn check(args: &Bound<'_, PyTuple>) -> PyResult<(usize, usize, usize, usize, usize, usize)> {
    let s = describe(args)?.problem.shape;
    Ok((s.b, s.h, s.hkv, s.sq, s.sk, s.d))
}

/// Adds Python site-packages directories to the search for NVRTC and cuBLAS (the package
/// passes `sys.path`).
#[pyfunction]
fn add_site_dirs(dirs: Vec<String>) {
    evoattn::runtime::culib::add_site_dirs(dirs.into_iter().map(Into::into));
}

/// NVRTC's version and where it was loaded from; `UnavailableError` when none is found.
#[pyfunction]
fn nvrtc() -> PyResult<((i32, i32), String)> {
    let n = evoattn::runtime::nvrtc::Nvrtc::get().map_err(to_py)?;
    Ok((n.version(), n.library().to_string()))
}

/// evoattn on one GPU: kernels compiled once and kept loaded, each problem signature's launch
/// prepared once. Shared by every Python thread; the GIL is released while a call plans or
/// launches.
#[pyclass(frozen)]
struct Library {
    attention: Mutex<Attention>,
    ordinal: usize,
    arch: Arch,
    sm_count: u32,
}

impl Library {
    fn lock(&self) -> std::sync::MutexGuard<'_, Attention> {
        // A panic while the lock was held left no launch half-enqueued (launches are one driver
        // call); the state is still a valid cache.
        self.attention.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl Library {
    /// Opens CUDA device `ordinal` (PyTorch's device index) in its primary context, PyTorch's.
    #[new]
    fn new(py: Python<'_>, ordinal: usize) -> PyResult<Self> {
        let attention = py.detach(|| Attention::new(ordinal)).map_err(to_py)?;
        let (arch, sm_count) = (attention.gpu().arch(), attention.gpu().sm_count());
        Ok(Library { attention: Mutex::new(attention), ordinal, arch, sm_count })
    }

    /// The GPU, its arch, SM count and driver, and the number of prepared launches and of
    /// streams holding scratch (each bounded).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let a = self.lock();
        let d = PyDict::new(py);
        d.set_item("gpu", a.gpu().name())?;
        d.set_item("arch", a.gpu().arch().to_string())?;
        d.set_item("sm_count", a.gpu().sm_count())?;
        d.set_item("driver", a.gpu().driver_version())?;
        d.set_item("cache_dir", a.cache().dir().display().to_string())?;
        d.set_item("prepared_launches", a.prepared_launches())?;
        d.set_item("max_prepared_launches", evoattn::attention::MAX_PREPARED_LAUNCHES)?;
        d.set_item("scratch_streams", a.scratch_streams())?;
        d.set_item("max_scratch_streams", evoattn::runtime::scratch::MAX_STREAM_ARENAS)?;
        Ok(d)
    }

    /// `None` when a prepared call can run here, else why not: the planned kernel's own limits
    /// on this GPU (a head dim or mask it does not take), as the `ValueError` a launch would
    /// raise says it. What `evoattn.torch`'s SDPA route asks before it takes a call.
    fn refusal(&self, call: &Prepared) -> Option<String> {
        self.lock().plan(&call.problem, call.request).err().map(|e| to_py(e).to_string())
    }

    /// Describes a call (each tensor `(sizes, strides)` in `layout`'s axis order, o the output
    /// with q's sizes, `with_lse` for a `[B, H, Sq]` float32 dense LSE output) for [`kernel`]
    /// and [`refusal`]: every check that needs no device address.
    ///
    /// [`kernel`]: Library::kernel
    /// [`refusal`]: Library::refusal
    #[pyo3(signature = (*args))]
    fn prepare(&self, args: &Bound<'_, PyTuple>) -> PyResult<Prepared> {
        let call = describe(args)?;
        let request = self.request_for(&call)?;
        Ok(Prepared { problem: call.problem, request })
    }

    /// Describes and launches one call on the CUDA stream `stream` (a raw handle): q, k, v and o
    /// as DLPack capsules (`torch._C._to_dlpack`: address, device, dtype, sizes and strides in
    /// one export each), lse the address of a fresh dense `[B, H, Sq]` float32 tensor or None.
    /// E4M3 inputs come as uint8 views (DLPack 0.x has no float8 code) with `descale`, the
    /// address of their dense `[3, B, Hkv]` float32 descales; o is then bf16.
    /// The eager path's one crossing into Rust: describing a call from capsules costs less than
    /// reading the tensors' attributes in Python to look up a prepared one.
    #[pyo3(signature = (stream, q, k, v, o, lse, layout, causal, scale, with_lse, imp, config, descale=None))]
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        py: Python<'_>,
        stream: usize,
        q: &Bound<'_, PyAny>,
        k: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
        o: &Bound<'_, PyAny>,
        lse: Option<u64>,
        layout: &str,
        causal: &str,
        scale: Option<f64>,
        with_lse: bool,
        imp: &str,
        config: Option<String>,
        descale: Option<u64>,
    ) -> PyResult<()> {
        let names = [TensorName::Q, TensorName::K, TensorName::V, TensorName::O];
        let read = [dlpack(names[0], q)?, dlpack(names[1], k)?, dlpack(names[2], v)?, dlpack(names[3], o)?];
        self.check_devices(names.iter().zip(&read))?;
        let mut dtypes = read.each_ref().map(DlpackTensor::dtype_name);
        if descale.is_some() {
            for (name, dtype) in names.iter().zip(&mut dtypes).take(3) {
                if dtype != "uint8" {
                    return Err(value_err(format!("{name}: E4M3 inputs cross as uint8 views, got {dtype}")));
                }
                *dtype = Dtype::E4m3.name().to_string();
            }
        }
        let tensors: [TensorDesc<'_>; 4] = std::array::from_fn(|i| TensorDesc {
            view: StridedTensor { sizes: &read[i].sizes, strides: &read[i].strides },
            dtype: &dtypes[i],
        });
        let call = describe_parts(layout, tensors, causal, scale, with_lse, imp, config)?;
        let request = self.request_for(&call)?;
        let [q, k, v, o] = read.each_ref().map(|t| t.addr);
        // Safety: the addresses come from the DLPack exports of CUDA tensors on this Library's
        // device (checked above) whose sizes, strides and dtypes the problem was described from
        // (so each holds its extent), kept alive by the caller across the call and by PyTorch's
        // caching allocator's stream semantics after it; lse is a fresh dense [B, H, Sq] float32
        // tensor; descale, given with E4M3 inputs, a dense [3, B, Hkv] float32 tensor.
        let tensors = unsafe { ExternalTensors::new(&call.problem, q, k, v, o, lse, descale) };
        py.detach(|| {
            let mut attention = self.lock();
            // Safety: `stream` is PyTorch's current stream of this device (or a stream handle the
            // caller owns, kept alive across the call), in the primary context `Attention` opened.
            let stream = unsafe { attention.gpu().borrow_stream(stream) };
            attention.call_external(&stream, &call.problem, request, tensors)
        })
        .map(|_| ())
        .map_err(to_py)
    }

    /// The backward pass of a forward call on the CUDA stream `stream`: q, k, v, o (the
    /// forward's), d_o (the loss's gradient of o, laid out as o) and dq, dk, dv (outputs, laid
    /// out as q, k, v) as DLPack capsules, lse the address of the forward's dense `[B, H, Sq]`
    /// float32 LSE. Returns the backward kernel's name.
    #[pyo3(signature = (stream, q, k, v, o, d_o, lse, dq, dk, dv, layout, causal, scale))]
    #[allow(clippy::too_many_arguments)]
    fn backward(
        &self,
        py: Python<'_>,
        stream: usize,
        q: &Bound<'_, PyAny>,
        k: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
        o: &Bound<'_, PyAny>,
        d_o: &Bound<'_, PyAny>,
        lse: u64,
        dq: &Bound<'_, PyAny>,
        dk: &Bound<'_, PyAny>,
        dv: &Bound<'_, PyAny>,
        layout: &str,
        causal: &str,
        scale: Option<f64>,
    ) -> PyResult<String> {
        let names = [TensorName::Q, TensorName::K, TensorName::V, TensorName::O];
        let read = [dlpack(names[0], q)?, dlpack(names[1], k)?, dlpack(names[2], v)?, dlpack(names[3], o)?];
        let grads = [TensorName::DO, TensorName::DQ, TensorName::DK, TensorName::DV];
        let grad = [dlpack(grads[0], d_o)?, dlpack(grads[1], dq)?, dlpack(grads[2], dk)?, dlpack(grads[3], dv)?];
        self.check_devices(names.iter().zip(&read).chain(grads.iter().zip(&grad)))?;
        // Each gradient is laid out (and typed) as the tensor it belongs to: dO as O, dQ as Q...
        for ((g, gt), (t, tt)) in grads.iter().zip(&grad).zip([
            (names[3], &read[3]),
            (names[0], &read[0]),
            (names[1], &read[1]),
            (names[2], &read[2]),
        ]) {
            if gt.sizes != tt.sizes || gt.strides != tt.strides || gt.dtype_name() != tt.dtype_name() {
                return Err(value_err(format!(
                    "{g} must have {t}'s sizes, strides and dtype ({:?}, {:?}, {}), got {:?}, {:?}, {}",
                    tt.sizes,
                    tt.strides,
                    tt.dtype_name(),
                    gt.sizes,
                    gt.strides,
                    gt.dtype_name()
                )));
            }
        }
        let dtypes = read.each_ref().map(DlpackTensor::dtype_name);
        let tensors: [TensorDesc<'_>; 4] = std::array::from_fn(|i| TensorDesc {
            view: StridedTensor { sizes: &read[i].sizes, strides: &read[i].strides },
            dtype: &dtypes[i],
        });
        let call = describe_parts(layout, tensors, causal, scale, false, "auto", None)?;
        let [q, k, v, o] = read.each_ref().map(|t| t.addr);
        let [d_o, dq, dk, dv] = grad.each_ref().map(|t| t.addr);
        // Safety: the addresses come from the DLPack exports of CUDA tensors on this Library's
        // device (checked above) whose sizes, strides and dtypes the problem was described from
        // (the gradients' checked equal to their tensors'), kept alive by the caller across the
        // call and by PyTorch's caching allocator's stream semantics after it; lse is the
        // forward's dense [B, H, Sq] float32 tensor.
        let buffers = unsafe { BackwardBuffers::new(&call.problem, [q, k, v, o, d_o, lse, dq, dk, dv]) };
        py.detach(|| {
            let mut attention = self.lock();
            // Safety: as for `call`: PyTorch's current stream of this device, in the primary context.
            let stream = unsafe { attention.gpu().borrow_stream(stream) };
            attention.call_backward_external(&stream, &call.problem, Request::Auto, buffers)
        })
        .map(|spec| spec.name())
        .map_err(to_py)
    }

    /// The kernel a prepared call runs with here (its name with every lever).
    fn kernel(&self, call: &Prepared) -> PyResult<String> {
        self.lock().plan(&call.problem, call.request).map(|plan| plan.spec.name()).map_err(to_py)
    }
}

impl Library {
    /// Every tensor is a CUDA tensor on this Library's device.
    fn check_devices<'a>(&self, tensors: impl Iterator<Item = (&'a TensorName, &'a DlpackTensor)>) -> PyResult<()> {
        for (name, t) in tensors {
            if t.device_type != DEVICE_CUDA {
                let place = if t.device_type == DEVICE_CPU {
                    "cpu".to_string()
                } else {
                    format!("DLPack device type {}", t.device_type)
                };
                return Err(value_err(format!("{name} is on {place}; evoattn runs on CUDA tensors")));
            }
            if t.device_id as usize != self.ordinal {
                return Err(value_err(format!(
                    "{name} is on cuda:{} but q is on cuda:{}; put all tensors on one GPU",
                    t.device_id, self.ordinal
                )));
            }
        }
        Ok(())
    }

    /// The call's request: its lever overrides on the planner's config of the named impl for its
    /// problem on this GPU, or the impl asked for.
    fn request_for(&self, call: &Call) -> PyResult<Request> {
        match (&call.config, call.request) {
            (Some(text), Request::Family(imp)) => {
                let base = evoattn::defaults::for_problem(imp, self.arch, &call.problem, self.sm_count);
                base.with_overrides(text).map(Request::Config).map_err(value_err)
            }
            _ => Ok(call.request),
        }
    }
}

#[pymodule]
fn _evoattn(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Library>()?;
    m.add_class::<Prepared>()?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(add_site_dirs, m)?)?;
    m.add_function(wrap_pyfunction!(nvrtc, m)?)?;
    m.add("UnavailableError", m.py().get_type::<UnavailableError>())?;
    m.add("MAX_HEAD_DIM", evoattn::MAX_HEAD_DIM)?;
    Ok(())
}
