//! The SM clock while timed blocks run: a thread reads it every [`POLL`] while the lab times a
//! block (ours or an oracle's), so each sample carries the clock its block ran at and a record
//! shows the GPU's power state. A block's time does not follow the clock NVML reports (an H100
//! at its power cap, session 35: a block at 1240 MHz took 14% longer than one at 1980, not
//! 60%), so the clocks explain a spread and correct nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the clock is read while a block runs: a 5-sample block of a 10 µs kernel (with
/// its flushes and warm-up) takes a few ms, one of a 3 ms kernel tens.
const POLL: Duration = Duration::from_millis(1);

/// Something that reads a GPU's SM clock in MHz.
pub trait ClockSource: Send + Sync {
    fn mhz(&self) -> Option<u32>;
}

impl ClockSource for evoattn::runtime::nvml::SmClock {
    fn mhz(&self) -> Option<u32> {
        evoattn::runtime::nvml::SmClock::mhz(self)
    }
}

struct Shared {
    source: Arc<dyn ClockSource>,
    /// Whether a block is running (the thread reads only then).
    active: AtomicBool,
    stop: AtomicBool,
    readings: Mutex<Vec<u32>>,
}

/// Reads a clock on its own thread while [`ClockSampler::during`] runs its closure.
pub struct ClockSampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl ClockSampler {
    pub fn start(source: Arc<dyn ClockSource>) -> Self {
        let shared = Arc::new(Shared {
            source,
            active: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            readings: Mutex::new(Vec::new()),
        });
        let poller = Arc::clone(&shared);
        let thread = std::thread::spawn(move || {
            while !poller.stop.load(Ordering::Acquire) {
                if poller.active.load(Ordering::Acquire) {
                    if let Some(mhz) = poller.source.mhz() {
                        poller.readings.lock().expect("clock readings").push(mhz);
                    }
                }
                std::thread::sleep(POLL);
            }
        });
        ClockSampler { shared, thread: Some(thread) }
    }

    /// Runs `f`, and gives its result with the mean of the clock readings taken while it ran
    /// (one taken at its end when none fell within it; `None` when the clock could not be read).
    pub fn during<T>(&self, f: impl FnOnce() -> T) -> (T, Option<f64>) {
        self.shared.readings.lock().expect("clock readings").clear();
        self.shared.active.store(true, Ordering::Release);
        let out = f();
        self.shared.active.store(false, Ordering::Release);
        let mut readings = std::mem::take(&mut *self.shared.readings.lock().expect("clock readings"));
        if readings.is_empty() {
            readings.extend(self.shared.source.mhz());
        }
        let mean =
            (!readings.is_empty()).then(|| readings.iter().map(|&m| f64::from(m)).sum::<f64>() / readings.len() as f64);
        (out, mean)
    }
}

impl Drop for ClockSampler {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs `f` under `sampler` when there is one: its result and the clock it ran at.
pub fn clocked<T>(sampler: Option<&ClockSampler>, f: impl FnOnce() -> T) -> (T, Option<f64>) {
    match sampler {
        Some(s) => s.during(f),
        None => (f(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// A clock that reads 1000 MHz, then 1001, 1002, ... one more at each reading.
    struct Rising(AtomicU32);

    impl ClockSource for Rising {
        fn mhz(&self) -> Option<u32> {
            Some(1000 + self.0.fetch_add(1, Ordering::Relaxed))
        }
    }

    struct Silent;

    impl ClockSource for Silent {
        fn mhz(&self) -> Option<u32> {
            None
        }
    }

    #[test]
    fn a_block_gets_the_mean_of_the_readings_taken_while_it_ran() {
        let sampler = ClockSampler::start(Arc::new(Rising(AtomicU32::new(0))));
        let (value, mhz) = sampler.during(|| {
            std::thread::sleep(Duration::from_millis(30));
            7
        });
        assert_eq!(value, 7);
        let mhz = mhz.expect("readings were taken");
        // Several readings, from 1000 up: their mean lies above the first and below the last.
        assert!(mhz > 1000.0 && mhz < 1100.0, "{mhz}");
    }

    #[test]
    fn between_blocks_the_clock_is_not_read() {
        let source = Arc::new(Rising(AtomicU32::new(0)));
        let sampler = ClockSampler::start(source.clone());
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(source.0.load(Ordering::Relaxed), 0);
        drop(sampler);
    }

    #[test]
    fn a_block_too_short_for_a_poll_gets_one_reading_at_its_end() {
        let sampler = ClockSampler::start(Arc::new(Rising(AtomicU32::new(0))));
        let (_, mhz) = sampler.during(|| ());
        assert!(mhz.is_some_and(|m| m >= 1000.0));
    }

    #[test]
    fn a_clock_that_cannot_be_read_gives_none_and_no_sampler_gives_none() {
        let sampler = ClockSampler::start(Arc::new(Silent));
        assert_eq!(sampler.during(|| 1), (1, None));
        assert_eq!(clocked(None, || 2), (2, None));
    }
}
