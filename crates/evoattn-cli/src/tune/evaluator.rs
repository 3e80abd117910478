//! The real evaluator: compile and resource gates in this process, on CPU threads (NVRTC
//! needs no GPU, and the worker processes then find lever configs in the disk cache), then
//! correctness and timing in the worker processes, one per GPU, fed from one work queue.

use super::evolve::{past, Child, Evaluation, Evaluator, Gate};
use super::pool::Worker;
use super::profiler::Profiler;
use super::protocol::{Request, VariantFile};
use crate::lab::ceilings::Ceilings;
use crate::lab::roofline;
use crate::lab::scratch::Scratch;
use crate::lab::variant::compile_source;
use evoattn::kernels::SourceFile;
use evoattn::runtime::cache::CubinCache;
use evoattn::runtime::compile::{compile_parallel, CompiledKernel};
use evoattn::{Arch, Causal, Layout, Problem, Shape};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// File name NVRTC reports for a proposed source.
const VARIANT_SOURCE_NAME: &str = "proposed.cu";

/// Samples per shape and candidate: enough for a stable median (the discard rule's 10% is far
/// above its spread), few enough that a generation takes seconds.
pub const TUNE_SAMPLES: usize = 30;
/// Untimed launches before them.
pub const TUNE_WARMUP: usize = 3;

pub struct WorkerEvaluator {
    pub workers: Vec<Worker>,
    arch: Arch,
    /// The mask of the problems being tuned.
    pub causal: Causal,
    /// The GPU's measured ceilings, for the integrity gate's roofline (None: not measured,
    /// which the run said when it started).
    pub ceilings: Option<Ceilings>,
    /// Profiles each candidate that passes the integrity gate, when the run needs counters.
    pub profiler: Option<Profiler>,
    cache: CubinCache,
    /// Where proposed sources' CUBINs are handed to the workers.
    dir: Scratch,
    next_id: u64,
}

impl WorkerEvaluator {
    pub fn new(workers: Vec<Worker>, arch: Arch) -> anyhow::Result<Self> {
        let cache = CubinCache::open(CubinCache::default_dir())?;
        let dir = Scratch::new("tune")?;
        Ok(WorkerEvaluator {
            workers,
            arch,
            causal: Causal::None,
            ceilings: None,
            profiler: None,
            cache,
            dir,
            next_id: 0,
        })
    }

    /// The request for a child that passed the compile and resource gates.
    fn request(&mut self, child: &Child, compiled: &CompiledKernel, shapes: &[Shape]) -> Result<Request, String> {
        self.next_id += 1;
        let id = self.next_id;
        let variant = match &child.source {
            None => None,
            Some(source) => {
                Some(VariantFile::write(self.dir.path().join(format!("variant-{id}.cubin")), source, compiled)?)
            }
        };
        Ok(Request {
            warmup: TUNE_WARMUP,
            samples: TUNE_SAMPLES,
            variant,
            roofline_us: self.ceilings.map(|c| {
                let problem = |&s| Problem::dense(s, child.spec.dtype, Layout::Bhsd).with_causal(self.causal);
                shapes.iter().map(|s| roofline::impossible_below_us(&problem(s), c)).collect()
            }),
            ..Request::new(id, &child.spec, self.causal, shapes)
        })
    }
}

impl Evaluator for WorkerEvaluator {
    fn evaluate_batch(
        &mut self,
        children: &[Child],
        shapes: &[Shape],
        deadline: Option<Instant>,
        done: &mut dyn FnMut(usize, Evaluation),
    ) {
        // Compile gate: lever configs in parallel through the cache (a round of one per thread
        // at a time, so a spent budget stops the compiles too), proposed sources after.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut compiled_levers = Vec::new();
        for round in children.iter().filter(|c| c.source.is_none()).collect::<Vec<_>>().chunks(threads) {
            if past(deadline) {
                break;
            }
            let jobs: Vec<_> = round.iter().map(|c| (c.spec, self.arch)).collect();
            compiled_levers.extend(compile_parallel(&jobs, Some(&self.cache), threads, || {}));
        }
        let mut levers = compiled_levers.into_iter();
        let mut queue = Vec::new();
        for (i, child) in children.iter().enumerate() {
            let compiled = match &child.source {
                None => match levers.next() {
                    Some(c) => c,
                    None => break, // the budget ran out before this one compiled
                },
                Some(_) if past(deadline) => break,
                Some(source) => {
                    // NVRTC's `SourceFile` holds `'static` text, so the source is leaked: at most
                    // one per generation, a few KiB each.
                    let text: &'static str = Box::leak(source.clone().into_boxed_str());
                    compile_source(&child.spec, self.arch, &SourceFile { name: VARIANT_SOURCE_NAME, text }, &[])
                }
            };
            let compiled = match compiled {
                Ok(c) => c,
                Err(e) => {
                    done(i, Evaluation::failed(Gate::Compile, e.to_string()));
                    continue;
                }
            };
            if let Err(e) = compiled.gate() {
                done(i, Evaluation::failed(Gate::Resources, e.to_string()));
                continue;
            }
            match self.request(child, &compiled, shapes) {
                Ok(request) => queue.push((i, request, child.spec.name())),
                Err(e) => done(i, Evaluation::failed(Gate::Correctness, e)),
            }
        }
        // Correctness and timing: every worker takes the next candidate when it is free.
        let next = AtomicUsize::new(0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let profiler = self.profiler.as_ref();
            for worker in &mut self.workers {
                let (tx, queue, next) = (tx.clone(), &queue, &next);
                s.spawn(move || {
                    while let Some((i, request, kernel)) = queue.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if past(deadline) {
                            return;
                        }
                        let mut eval = worker.evaluate(request);
                        // On this worker's GPU, before it takes its next candidate.
                        if let (None, Some(p)) = (&eval.failure, profiler) {
                            match p.profile(worker.gpu, request, kernel) {
                                Ok(counters) => eval.counters = Some(counters),
                                Err(e) => eval = Evaluation::failed(Gate::Ncu, e),
                            }
                        }
                        if tx.send((*i, eval)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(tx);
            // Reported here, on the caller's thread, as each completes: the store writes at once.
            for (i, eval) in rx {
                done(i, eval);
            }
        });
    }
}
