//! The tuner's live display: generation, the best elite's speedup, evaluations and failures per
//! gate, ETA.
//! A bar on a terminal; one plain line per generation and per failure otherwise (logs, CI). A
//! failure or warning whose text came before is counted, not said again, and the counts close
//! the run.

use super::evolve::{Candidate, Child, Evaluation, Gate};
use crate::out::errln;
use crate::text::Repeats;
use indicatif::{ProgressBar, ProgressStyle};
use std::cell::{Cell, RefCell};
use std::io::IsTerminal;

pub struct Progress {
    bar: ProgressBar,
    plain: bool,
    evaluated: Cell<usize>,
    discarded: Cell<usize>,
    /// Failures per gate, in `Gate::ALL` order.
    failed: RefCell<[usize; Gate::ALL.len()]>,
    best: Cell<f64>,
    /// The texts said once so far (a gate's error, a proposer's warning) and their repeats.
    said: RefCell<Repeats>,
}

impl Progress {
    pub fn new(generations: usize) -> Self {
        let plain = !std::io::stderr().is_terminal();
        let bar = if plain { ProgressBar::hidden() } else { ProgressBar::new(generations as u64) };
        bar.set_style(
            ProgressStyle::with_template("{bar:30} generation {pos}/{len} {msg} [{elapsed}, eta {eta}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Progress {
            bar,
            plain,
            evaluated: Cell::new(0),
            discarded: Cell::new(0),
            failed: RefCell::new([0; Gate::ALL.len()]),
            best: Cell::new(1.0),
            said: RefCell::new(Repeats::default()),
        }
    }

    /// Failures per gate, as `compile 1, resources 0, ...`.
    pub fn failures(&self) -> String {
        let failed = self.failed.borrow();
        Gate::ALL.iter().zip(failed.iter()).map(|(g, n)| format!("{} {n}", g.name())).collect::<Vec<_>>().join(", ")
    }

    fn status(&self) -> String {
        format!(
            "best speedup {:.3}×, {} evaluated, {} discarded, failed: {}",
            self.best.get(),
            self.evaluated.get(),
            self.discarded.get(),
            self.failures()
        )
    }

    /// A generation starts (or, past the last, the run ends).
    pub fn generation(&self, generation: usize, elites: &[Candidate]) {
        if let Some(best) = elites.first() {
            // The speedup, also when the composite score ranked it.
            self.best.set(best.speedup);
        }
        self.bar.set_position(generation as u64);
        self.bar.set_message(self.status());
        if self.plain {
            errln!("tune: generation {generation}: {}", self.status());
        }
    }

    /// One evaluation completed.
    pub fn evaluated(&self, child: &Child, eval: &Evaluation, discarded: bool) {
        self.evaluated.set(self.evaluated.get() + 1);
        self.discarded.set(self.discarded.get() + usize::from(discarded));
        if let Some((gate, error)) = &eval.failure {
            if let Some(i) = Gate::ALL.iter().position(|g| g == gate) {
                self.failed.borrow_mut()[i] += 1;
            }
            let first = error.lines().next().unwrap_or_default();
            if self.said.borrow_mut().first(&format!("the {} gate: {first}", gate.name())) {
                self.say(&format!("tune: {} failed the {} gate: {first}", child.name(), gate.name()));
            }
        }
        self.bar.set_message(self.status());
    }

    /// A line said once: later comings of the same text are counted for [`Self::finish`].
    pub fn say_once(&self, line: &str) {
        if self.said.borrow_mut().first(line) {
            self.say(line);
        }
    }

    /// A line above the bar (or on its own off a terminal).
    pub fn say(&self, line: &str) {
        if self.plain {
            errln!("{line}");
        } else {
            self.bar.suspend(|| errln!("{line}"));
        }
    }

    /// Clears the bar, and says how often each text said once came again.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        for (text, more) in self.said.borrow().repeated() {
            let times = crate::text::count(more, "time", "times");
            match text.strip_prefix("the ") {
                // A gate's error: `the correctness gate: ...`.
                Some(failure) => errln!("tune: {times} more, a candidate failed the {failure}"),
                None => errln!("{text} ({times} more)"),
            }
        }
    }
}
