//! The real backend: the library on GPU 0.

use crate::lab::backend::{
    Backend, BackendInfo, Backward, Forward, HostCostRounds, Kernel, Timing, TimingOptions, TraceRun, Variant,
};
use crate::lab::inputs::{Draw, HostInputs, Inputs};
use crate::out::errln;
use crate::stores::record::Mode;
use evoattn::cudarc::driver::sys::{CUgraphInstantiate_flags as GraphFlags, CUstreamCaptureMode as CaptureMode};
use evoattn::cudarc::driver::{CudaSlice, CudaStream};
use evoattn::runtime::device::LoadedKernel;
use evoattn::runtime::launch::Launch;
use evoattn::runtime::nvml::SmClock;
use evoattn::runtime::nvrtc::Nvrtc;
use evoattn::{Attention, BackwardTensors, DeviceTensors, Impl, InputViews, Plan, Problem, Request, TensorName};
use std::sync::Arc;

/// GPU time the graph-mode hold lasts per sample: well above the host's few microseconds to
/// enqueue a flush, two events and a replay (the oracle holds its stream the same way).
const GRAPH_HOLD_PER_SAMPLE: std::time::Duration = std::time::Duration::from_micros(100);

/// NaN in float32, for the LSE poison.
const F32_NAN: f32 = f32::NAN;

pub struct GpuBackend {
    attention: Attention,
    /// The last drawn inputs, by problem and draw: a case is checked, then timed in many blocks,
    /// on the same inputs. Drawing them again would cost a launch; uploading them, host time.
    drawn: Option<(String, Draw, DeviceInputs)>,
    /// The last source variant loaded, by its CUBIN's digest: loaded once for all its calls,
    /// as a caller would, so module globals persist from call to call (a kernel that counts
    /// its launches and misbehaves once timed must meet the same module in the tuner's
    /// recheck).
    variant: Option<(u64, Arc<LoadedKernel>)>,
    /// The SM clock's reader, opened on first use (`None` inside: NVML could not open it).
    clock: Option<Option<Arc<SmClock>>>,
}

/// Q, K and V on the device (and an E4M3 problem's descales, `[3, B, Hkv]`).
enum DeviceInputs {
    Sixteen { q: CudaSlice<u16>, k: CudaSlice<u16>, v: CudaSlice<u16> },
    Fp8 { q: CudaSlice<u8>, k: CudaSlice<u8>, v: CudaSlice<u8>, descale: CudaSlice<f32> },
}

impl DeviceInputs {
    /// Views of the tensors' extents in `problem`.
    fn views(&self, problem: &Problem) -> InputViews<'_> {
        let len = |t| problem.extent(t);
        let (q_len, k_len, v_len) = (len(TensorName::Q), len(TensorName::K), len(TensorName::V));
        match self {
            DeviceInputs::Sixteen { q, k, v } => {
                InputViews::Sixteen { q: q.slice(..q_len), k: k.slice(..k_len), v: v.slice(..v_len) }
            }
            DeviceInputs::Fp8 { q, k, v, descale } => InputViews::Fp8 {
                q: q.slice(..q_len),
                k: k.slice(..k_len),
                v: v.slice(..v_len),
                descale: descale.slice(..len(TensorName::Descale)),
            },
        }
    }

    /// [`crate::lab::backend::digest`] of each tensor's extent in `problem`, read back.
    fn digests(&self, stream: &Arc<CudaStream>, problem: &Problem) -> evoattn::Result<Vec<(TensorName, u64)>> {
        fn of<T: evoattn::cudarc::driver::DeviceRepr + Default + Clone>(
            stream: &Arc<CudaStream>,
            (name, slice, len): (TensorName, &CudaSlice<T>, usize),
            bytes: impl Fn(&T) -> Vec<u8>,
        ) -> evoattn::Result<(TensorName, u64)> {
            let mut host = vec![T::default(); len];
            stream.memcpy_dtoh(&slice.slice(..len), &mut host).map_err(driver("cuMemcpyDtoH"))?;
            stream.synchronize().map_err(driver("cuStreamSynchronize (input read-back)"))?;
            Ok((name, crate::lab::backend::digest(&host.iter().flat_map(bytes).collect::<Vec<u8>>())))
        }
        let half = |x: &u16| x.to_le_bytes().to_vec();
        let byte = |x: &u8| vec![*x];
        let len = |t| problem.extent(t);
        let (q, k, v) = (TensorName::Q, TensorName::K, TensorName::V);
        match self {
            DeviceInputs::Sixteen { q: qs, k: ks, v: vs } => Ok(vec![
                of(stream, (q, qs, len(q)), half)?,
                of(stream, (k, ks, len(k)), half)?,
                of(stream, (v, vs, len(v)), half)?,
            ]),
            DeviceInputs::Fp8 { q: qs, k: ks, v: vs, descale } => Ok(vec![
                of(stream, (q, qs, len(q)), byte)?,
                of(stream, (k, ks, len(k)), byte)?,
                of(stream, (v, vs, len(v)), byte)?,
                of(stream, (TensorName::Descale, descale, len(TensorName::Descale)), |x: &f32| {
                    x.to_le_bytes().to_vec()
                })?,
            ]),
        }
    }

    /// Host inputs uploaded: 16-bit bits as they are, E4M3 bytes from their low halves.
    fn upload(stream: &Arc<CudaStream>, host: &HostInputs) -> evoattn::Result<Self> {
        match &host.descales {
            None => {
                let [q, k, v] = [&host.q, &host.k, &host.v].map(|h| upload(stream, h));
                Ok(DeviceInputs::Sixteen { q: q?, k: k?, v: v? })
            }
            Some(d) => {
                let bytes = |h: &[u16]| upload(stream, &h.iter().map(|&x| x as u8).collect::<Vec<u8>>());
                Ok(DeviceInputs::Fp8 {
                    q: bytes(&host.q)?,
                    k: bytes(&host.k)?,
                    v: bytes(&host.v)?,
                    descale: upload(stream, &d.concat())?,
                })
            }
        }
    }
}

impl GpuBackend {
    pub fn new(ordinal: usize) -> anyhow::Result<Self> {
        Ok(GpuBackend { attention: Attention::new(ordinal)?, drawn: None, variant: None, clock: None })
    }

    /// `inputs` on the device: drawn there (kept for the next call on the same problem and
    /// draw) or uploaded. Take it with [`Self::take_inputs`] and return it with [`Self::keep`].
    fn take_inputs(&mut self, problem: &Problem, inputs: Inputs) -> evoattn::Result<(Option<Draw>, DeviceInputs)> {
        problem.validate()?;
        let stream = self.attention.gpu().stream().clone();
        let draw = match inputs {
            Inputs::Drawn(draw) => draw,
            Inputs::Host(host) => return Ok((None, DeviceInputs::upload(&stream, host)?)),
        };
        let key = format!("{problem:?}");
        if let Some((cached_key, cached_draw, _)) = &self.drawn {
            if *cached_key == key && *cached_draw == draw {
                let (_, _, device) = self.drawn.take().expect("checked above");
                return Ok((Some(draw), device));
            }
        }
        // Free the last case's inputs before allocating this one's: both may be gigabytes.
        self.drawn = None;
        if problem.dtype.is_fp8() {
            // E4M3 inputs are drawn on the host (their generator has no GPU twin yet).
            return Ok((Some(draw), DeviceInputs::upload(&stream, &draw.host(problem))?));
        }
        let gap = crate::lab::inputs::nan_bits(problem.dtype);
        let tensor = |t: TensorName| -> evoattn::Result<CudaSlice<u16>> {
            let mut buf = stream.alloc_zeros::<u16>(problem.extent(t).max(1)).map_err(driver("cuMemAlloc"))?;
            self.attention.gpu().draw(problem, t, &draw.stream(t), gap, &mut buf.as_view_mut())?;
            Ok(buf)
        };
        let device =
            DeviceInputs::Sixteen { q: tensor(TensorName::Q)?, k: tensor(TensorName::K)?, v: tensor(TensorName::V)? };
        Ok((Some(draw), device))
    }

    /// Keeps drawn inputs for the next call on the same problem.
    fn keep(&mut self, problem: &Problem, (draw, device): (Option<Draw>, DeviceInputs)) {
        if let Some(draw) = draw {
            self.drawn = Some((format!("{problem:?}"), draw, device));
        }
    }

    /// Poisons the output with NaN, runs `launch` on `inputs` and copies the result back;
    /// `launch` returns the name of the kernel it ran.
    fn forward_with(
        &mut self,
        problem: &Problem,
        inputs: Inputs,
        launch: impl FnOnce(&mut Attention, DeviceTensors<'_>) -> evoattn::Result<String>,
    ) -> evoattn::Result<Forward> {
        let taken = self.take_inputs(problem, inputs)?;
        let result = self.forward_on(problem, &taken.1, launch);
        self.keep(problem, taken);
        result
    }

    fn forward_on(
        &mut self,
        problem: &Problem,
        inputs: &DeviceInputs,
        launch: impl FnOnce(&mut Attention, DeviceTensors<'_>) -> evoattn::Result<String>,
    ) -> evoattn::Result<Forward> {
        let stream = self.attention.gpu().stream().clone();
        let o_len = problem.extent(TensorName::O);
        let poison = vec![crate::lab::inputs::nan_bits(problem.dtype.output()); o_len.max(1)];
        let mut o_dev = stream.clone_htod(&poison).map_err(driver("cuMemcpyHtoD"))?;
        let lse_len = problem.extent(TensorName::Lse).max(1);
        let mut lse_dev = if problem.with_lse {
            Some(stream.clone_htod(&vec![F32_NAN; lse_len]).map_err(driver("cuMemcpyHtoD"))?)
        } else {
            None
        };
        let tensors = DeviceTensors {
            inputs: inputs.views(problem),
            o: o_dev.slice_mut(..o_len),
            lse: lse_dev.as_mut().map(|l| l.slice_mut(..problem.extent(TensorName::Lse))),
        };
        let kernel = launch(&mut self.attention, tensors)?;
        stream.synchronize().map_err(driver("cuStreamSynchronize (kernel execution)"))?;
        let mut o_host = stream.clone_dtoh(&o_dev).map_err(driver("cuMemcpyDtoH"))?;
        o_host.truncate(o_len);
        let lse = match &lse_dev {
            Some(l) => {
                let mut host = stream.clone_dtoh(l).map_err(driver("cuMemcpyDtoH"))?;
                host.truncate(problem.extent(TensorName::Lse));
                Some(host)
            }
            None => None,
        };
        Ok(Forward { o: o_host, lse, kernel })
    }

    /// Times `launch` as [`Backend::time`] describes.
    #[allow(clippy::too_many_arguments)]
    fn time_with(
        &mut self,
        problem: &Problem,
        inputs: Inputs,
        options: TimingOptions,
        launch: impl FnMut(&mut Attention, DeviceTensors<'_>) -> evoattn::Result<()>,
    ) -> evoattn::Result<Timing> {
        let (draw, inputs) = self.take_inputs(problem, inputs)?;
        let mut case = DeviceCase::new(self.attention.gpu().stream(), problem, inputs)?;
        let result = self.time_on(&mut case, options, launch);
        self.keep(problem, (draw, case.inputs));
        result
    }

    fn time_on(
        &mut self,
        case: &mut DeviceCase,
        options: TimingOptions,
        mut launch: impl FnMut(&mut Attention, DeviceTensors<'_>) -> evoattn::Result<()>,
    ) -> evoattn::Result<Timing> {
        let stream = self.attention.gpu().stream().clone();
        let flush_len = crate::lab::backend::flush_bytes(self.attention.gpu().l2_bytes());
        let mut flush = stream.alloc_zeros::<u8>(flush_len.max(1)).map_err(driver("cuMemAlloc"))?;
        let mut launch = |attention: &mut Attention| launch(attention, case.tensors());
        for _ in 0..options.warmup.max(1) {
            launch(&mut self.attention)?;
        }
        // Graph mode: one launch captured once, then replayed; what is timed is the kernel
        // without the host's launch path.
        let graph = match options.mode {
            Mode::Eager => None,
            Mode::Graph => {
                stream
                    .begin_capture(CaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                    .map_err(driver("cuStreamBeginCapture"))?;
                let launched = launch(&mut self.attention);
                let captured = stream.end_capture(GraphFlags(0)).map_err(driver("cuStreamEndCapture"))?;
                launched?;
                Some(captured.ok_or_else(|| evoattn::Error::driver("cuStreamEndCapture", "captured an empty graph"))?)
            }
        };
        if graph.is_some() {
            // Hold the stream while the samples are enqueued: no host gap enters a sample.
            let samples = u32::try_from(options.samples).unwrap_or(u32::MAX);
            self.attention.gpu().hold(GRAPH_HOLD_PER_SAMPLE.saturating_mul(samples))?;
        }
        let timing_flags = Some(evoattn::cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut events = Vec::with_capacity(options.samples);
        for _ in 0..options.samples {
            stream.memset_zeros(&mut flush).map_err(driver("cuMemsetD8"))?;
            let start = stream.record_event(timing_flags).map_err(driver("cuEventRecord"))?;
            match &graph {
                Some(g) => g.launch().map_err(driver("cuGraphLaunch"))?,
                None => {
                    launch(&mut self.attention)?;
                }
            }
            let end = stream.record_event(timing_flags).map_err(driver("cuEventRecord"))?;
            events.push((start, end));
        }
        stream.synchronize().map_err(driver("cuStreamSynchronize (kernel execution)"))?;
        let mut samples_us = Vec::with_capacity(events.len());
        for (start, end) in &events {
            let ms = start.elapsed_ms(end).map_err(driver("cuEventElapsedTime"))?;
            samples_us.push(f64::from(ms) * 1e3);
        }
        Ok(Timing { samples_us })
    }
}

impl GpuBackend {
    /// A variant's kernel, after checking it was compiled for this problem's dtype and head
    /// dim: loaded on its first call, the same module after.
    fn load_variant(&mut self, problem: &Problem, variant: &Variant) -> evoattn::Result<Arc<LoadedKernel>> {
        let spec = variant.compiled.spec;
        if spec.dtype != problem.dtype || spec.head_dim != problem.shape.d {
            return Err(evoattn::Error::Unsupported {
                imp: spec.imp().to_string(),
                reason: format!(
                    "variant {} does not fit a {} D={} problem",
                    spec.name(),
                    problem.dtype,
                    problem.shape.d
                ),
            });
        }
        let key = crate::lab::backend::digest(&variant.compiled.cubin);
        match &self.variant {
            Some((k, loaded)) if *k == key => Ok(loaded.clone()),
            _ => {
                let loaded = Arc::new(self.attention.gpu().load(&variant.compiled)?);
                self.variant = Some((key, loaded.clone()));
                Ok(loaded)
            }
        }
    }
}

fn driver<E: std::fmt::Display>(call: &'static str) -> impl Fn(E) -> evoattn::Error {
    move |e| evoattn::Error::driver(call, e)
}

/// Copies a host tensor to the device. Zero-length allocations are refused by the driver, so
/// an empty tensor gets one (never read) element.
fn upload<T: evoattn::cudarc::driver::DeviceRepr + Default + Clone>(
    stream: &Arc<CudaStream>,
    host: &[T],
) -> evoattn::Result<CudaSlice<T>> {
    let one = [T::default()];
    let host = if host.is_empty() { &one[..] } else { host };
    stream.clone_htod(host).map_err(driver("cuMemcpyHtoD"))
}

/// A case's inputs on the device, with zeroed outputs.
struct DeviceCase {
    problem: Problem,
    inputs: DeviceInputs,
    o: CudaSlice<u16>,
    lse: Option<CudaSlice<f32>>,
}

impl DeviceCase {
    fn new(stream: &Arc<CudaStream>, problem: &Problem, inputs: DeviceInputs) -> evoattn::Result<Self> {
        let o = stream.alloc_zeros::<u16>(problem.extent(TensorName::O).max(1)).map_err(driver("cuMemAlloc"))?;
        let lse = if problem.with_lse {
            Some(stream.alloc_zeros::<f32>(problem.extent(TensorName::Lse).max(1)).map_err(driver("cuMemAlloc"))?)
        } else {
            None
        };
        Ok(DeviceCase { problem: problem.clone(), inputs, o, lse })
    }

    fn tensors(&mut self) -> DeviceTensors<'_> {
        DeviceTensors {
            inputs: self.inputs.views(&self.problem),
            o: self.o.as_view_mut(),
            lse: self.lse.as_mut().map(|l| l.as_view_mut()),
        }
    }
}

/// Calls timed back to back before the host waits for the GPU: few enough that the launch
/// queue never fills (a full queue would make the host wait inside the call).
const HOST_COST_BATCH: usize = 50;

impl Backend for GpuBackend {
    fn info(&self) -> BackendInfo {
        let gpu = self.attention.gpu();
        let nvrtc = match Nvrtc::get() {
            Ok(n) => format!("{}.{} ({})", n.version().0, n.version().1, n.library()),
            Err(e) => format!("not found: {e}"),
        };
        BackendInfo {
            gpu: gpu.name().to_string(),
            compute_capability: gpu.compute_capability(),
            arch: gpu.arch().to_string(),
            sm_count: gpu.sm_count(),
            l2_bytes: gpu.l2_bytes(),
            driver: gpu.driver_version(),
            nvrtc,
            mock: false,
        }
    }

    fn backward(&mut self, plan: &Plan, inputs: &HostInputs, d_o: &[u16]) -> evoattn::Result<Backward> {
        let problem = &plan.problem;
        problem.validate()?;
        let stream = self.attention.gpu().stream().clone();
        let device = DeviceInputs::upload(&stream, inputs)?;
        let d_o = upload(&stream, d_o)?;
        let poison =
            |t: TensorName| upload(&stream, &vec![crate::lab::inputs::nan_bits(problem.dtype); problem.extent(t)]);
        let mut o = poison(TensorName::O)?;
        let mut lse = upload(&stream, &vec![F32_NAN; problem.extent(TensorName::Lse)])?;
        let forward = self.attention.plan(&problem.clone().with_lse(true), Request::Auto)?;
        let len = |t| problem.extent(t);
        self.attention.forward(
            &forward,
            DeviceTensors {
                inputs: device.views(problem),
                o: o.slice_mut(..len(TensorName::O)),
                lse: Some(lse.slice_mut(..len(TensorName::Lse))),
            },
        )?;
        let InputViews::Sixteen { q, k, v } = device.views(problem) else {
            return Err(evoattn::Error::Unsupported {
                imp: plan.spec.imp().to_string(),
                reason: "the backward pass takes f16 or bf16 inputs".into(),
            });
        };
        let (mut dq, mut dk, mut dv) = (poison(TensorName::DQ)?, poison(TensorName::DK)?, poison(TensorName::DV)?);
        let mut launch = self.attention.prepare_backward(plan)?;
        self.attention.run_backward(
            &mut launch,
            &stream,
            BackwardTensors {
                q,
                k,
                v,
                o: o.slice(..len(TensorName::O)),
                lse: lse.slice(..len(TensorName::Lse)),
                d_o: d_o.slice(..len(TensorName::DO)),
                dq: dq.slice_mut(..len(TensorName::DQ)),
                dk: dk.slice_mut(..len(TensorName::DK)),
                dv: dv.slice_mut(..len(TensorName::DV)),
            },
        )?;
        stream.synchronize().map_err(driver("cuStreamSynchronize (kernel execution)"))?;
        let down = |x: &CudaSlice<u16>, t: TensorName| -> evoattn::Result<Vec<u16>> {
            let mut host = stream.clone_dtoh(x).map_err(driver("cuMemcpyDtoH"))?;
            host.truncate(problem.extent(t));
            Ok(host)
        };
        Ok(Backward {
            dq: down(&dq, TensorName::DQ)?,
            dk: down(&dk, TensorName::DK)?,
            dv: down(&dv, TensorName::DV)?,
            kernel: plan.spec.name(),
        })
    }

    fn forward(&mut self, problem: &Problem, kernel: Kernel, inputs: Inputs) -> evoattn::Result<Forward> {
        match kernel {
            Kernel::Planned(plan) => self.forward_with(problem, inputs, |attention, tensors| {
                attention.forward(plan, tensors)?;
                Ok(plan.spec.name())
            }),
            Kernel::Reference => {
                let plan = self.attention.plan(problem, Request::Family(Impl::Reference))?;
                self.forward(problem, Kernel::Planned(&plan), inputs)
            }
            Kernel::Variant(variant) => {
                let loaded = self.load_variant(problem, variant)?;
                let stream = self.attention.gpu().stream().clone();
                self.forward_with(problem, inputs, |attention, tensors| {
                    let mut prepared = Launch::new(attention.gpu(), &loaded, problem)?;
                    attention.run_prepared(&mut prepared, &stream, tensors)?;
                    Ok(loaded.spec().name())
                })
            }
        }
    }

    fn sm_clock(&mut self) -> Option<Arc<dyn crate::lab::clock::ClockSource>> {
        let gpu = self.attention.gpu();
        let clock = self.clock.get_or_insert_with(|| {
            let opened = gpu.pci_bus_id().map_err(|e| e.to_string()).and_then(|bus| SmClock::open(&bus));
            opened
                .map_err(|why| errln!("evoattn: the SM clock is not read ({why}): timer controls compare raw times"))
                .ok()
                .map(Arc::new)
        });
        clock.clone().map(|c| c as Arc<dyn crate::lab::clock::ClockSource>)
    }

    fn time(
        &mut self,
        problem: &Problem,
        kernel: Kernel,
        inputs: Inputs,
        options: TimingOptions,
    ) -> evoattn::Result<Timing> {
        match kernel {
            Kernel::Planned(plan) => {
                self.time_with(problem, inputs, options, |attention, tensors| attention.forward(plan, tensors))
            }
            Kernel::Reference => {
                let plan = self.attention.plan(problem, Request::Family(Impl::Reference))?;
                self.time(problem, Kernel::Planned(&plan), inputs, options)
            }
            Kernel::Variant(variant) => {
                let loaded = self.load_variant(problem, variant)?;
                let stream = self.attention.gpu().stream().clone();
                let mut prepared = Launch::new(self.attention.gpu(), &loaded, problem)?;
                self.time_with(problem, inputs, options, |attention, tensors| {
                    attention.run_prepared(&mut prepared, &stream, tensors)
                })
            }
        }
    }

    fn host_cost(&mut self, plan: &Plan, inputs: Inputs, rounds: HostCostRounds) -> evoattn::Result<Vec<Vec<f64>>> {
        let problem = &plan.problem;
        let stream = self.attention.gpu().stream().clone();
        let (_, inputs) = self.take_inputs(problem, inputs)?;
        let mut case = DeviceCase::new(&stream, problem, inputs)?;
        // The first call plans, compiles or loads, and prepares: not what is measured.
        self.attention.forward_on(&stream, plan, case.tensors())?;
        let mut all = Vec::with_capacity(rounds.rounds);
        for round in 0..rounds.rounds {
            if round > 0 {
                std::thread::sleep(rounds.pause);
            }
            let mut samples_us = Vec::with_capacity(rounds.calls);
            while samples_us.len() < rounds.calls {
                stream.synchronize().map_err(driver("cuStreamSynchronize (kernel execution)"))?;
                for _ in 0..HOST_COST_BATCH.min(rounds.calls - samples_us.len()) {
                    let tensors = case.tensors();
                    let start = std::time::Instant::now();
                    self.attention.forward_on(&stream, plan, tensors)?;
                    samples_us.push(start.elapsed().as_secs_f64() * 1e6);
                }
            }
            stream.synchronize().map_err(driver("cuStreamSynchronize (kernel execution)"))?;
            all.push(samples_us);
        }
        Ok(all)
    }

    fn trace(&mut self, plan: &Plan, inputs: Inputs, warmup: usize) -> evoattn::Result<TraceRun> {
        let problem = &plan.problem;
        let stream = self.attention.gpu().stream().clone();
        let (_, inputs) = self.take_inputs(problem, inputs)?;
        let mut case = DeviceCase::new(&stream, problem, inputs)?;
        self.attention.prepare(plan)?;
        for _ in 0..warmup {
            self.attention.forward(plan, case.tensors())?;
        }
        self.attention.clear_trace(&plan.spec)?;
        self.attention.forward(plan, case.tensors())?;
        let warps = self.attention.read_trace(&plan.spec)?;
        Ok(TraceRun { kernel: plan.spec.name(), warps })
    }

    fn input_digests(&mut self, problem: &Problem, inputs: Inputs) -> evoattn::Result<Vec<(TensorName, u64)>> {
        let taken = self.take_inputs(problem, inputs)?;
        let digests = taken.1.digests(self.attention.gpu().stream(), problem);
        self.keep(problem, taken);
        digests
    }

    fn launch_image(&mut self, plan: &Plan) -> evoattn::Result<evoattn::runtime::device::LaunchImage> {
        self.attention.launch_image(plan)
    }
}
