//! Per-warp timelines of `trace=1` kernels (kernels/wgmma/trace.cuh): the words the kernel leaves in
//! its module global, decoded into each warp's events, and the cycles between consecutive
//! events grouped by the pair of marks they join (`evoattn trace` prints their statistics).

use crate::config::{KernelConfig, KernelSpec, TRACE_EVENTS, WARP_THREADS};
use std::collections::BTreeMap;

/// The module global a `trace=1` kernel writes.
pub const SYMBOL: &str = "evoattn_trace";
/// Bits of an event word below its tag (`TRACE_VALUE_BITS` in kernels/wgmma/trace.cuh).
pub const VALUE_BITS: u32 = 56;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;

/// The marks, numbered as `TraceTag` in kernels/wgmma/trace.cuh.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tag {
    Sm = 1,
    Tile = 2,
    KvReady = 3,
    Turn = 4,
    Issued = 5,
    SDone = 6,
    SoftmaxDone = 7,
    PvDone = 8,
    Packed = 9,
    Epilogue = 10,
    EpilogueDone = 11,
    ProducerTile = 12,
    ProducerK = 13,
    ProducerV = 14,
}

impl Tag {
    pub const ALL: [Tag; 14] = [
        Tag::Sm,
        Tag::Tile,
        Tag::KvReady,
        Tag::Turn,
        Tag::Issued,
        Tag::SDone,
        Tag::SoftmaxDone,
        Tag::PvDone,
        Tag::Packed,
        Tag::Epilogue,
        Tag::EpilogueDone,
        Tag::ProducerTile,
        Tag::ProducerK,
        Tag::ProducerV,
    ];

    pub fn from_code(code: u8) -> Option<Tag> {
        Tag::ALL.into_iter().find(|t| *t as u8 == code)
    }

    /// What the warp had just done when it stamped the mark.
    pub fn name(self) -> &'static str {
        match self {
            Tag::Sm => "sm",
            Tag::Tile => "tile's Q landed",
            Tag::KvReady => "K/V landed",
            Tag::Turn => "turn came",
            Tag::Issued => "GEMMs issued",
            Tag::SDone => "S done",
            Tag::SoftmaxDone => "softmax done",
            Tag::PvDone => "P·V done",
            Tag::Packed => "P packed",
            Tag::Epilogue => "epilogue begins",
            Tag::EpilogueDone => "epilogue done",
            Tag::ProducerTile => "producer: tile",
            Tag::ProducerK => "producer: K issued",
            Tag::ProducerV => "producer: V issued",
        }
    }

    pub fn is_producer(self) -> bool {
        matches!(self, Tag::ProducerTile | Tag::ProducerK | Tag::ProducerV)
    }
}

/// One warp's marks, in the order it stamped them: the SM's clock (cycles) at each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarpTrace {
    pub block: usize,
    pub warp: usize,
    /// The SM the block ran on.
    pub sm: u32,
    pub events: Vec<(Tag, u64)>,
    /// The warp filled its words: later events were not kept.
    pub full: bool,
}

impl WarpTrace {
    /// Whether the warp is the producer (it stamped producer marks).
    pub fn is_producer(&self) -> bool {
        self.events.iter().any(|(t, _)| t.is_producer())
    }
}

/// One event word: `tag` above `value` (cycles, or the SM's id).
pub fn word(tag: Tag, value: u64) -> u64 {
    ((tag as u64) << VALUE_BITS) | (value & VALUE_MASK)
}

/// Refuses a kernel that has no marks (`trace=0`, or not `wgmma`).
pub fn instrumented(spec: &KernelSpec) -> crate::Result<()> {
    if matches!(spec.config, KernelConfig::Wgmma(c) if c.trace) {
        Ok(())
    } else {
        Err(crate::Error::Unsupported {
            imp: spec.imp().to_string(),
            reason: format!("{} is not instrumented (trace=1)", spec.name()),
        })
    }
}

/// Decodes the global of the `trace=1` kernel `spec`: its warps' words, [`TRACE_EVENTS`] each.
pub fn decode_kernel(spec: &KernelSpec, words: &[u64]) -> crate::Result<Vec<WarpTrace>> {
    decode(words, (spec.threads() / WARP_THREADS) as usize, TRACE_EVENTS)
        .map_err(|reason| crate::Error::Unsupported { imp: spec.imp().to_string(), reason })
}

/// Decodes the global's words: `blocks` blocks of `warps` warps of `events` words each. Warps
/// that stamped nothing (untraced blocks) are left out; an unknown tag or a warp that does not
/// open with its SM is an error (the host and the kernel disagree on the format).
pub fn decode(words: &[u64], warps: usize, events: usize) -> Result<Vec<WarpTrace>, String> {
    if warps == 0 || events == 0 || !words.len().is_multiple_of(warps * events) {
        return Err(format!("{} trace words are not whole blocks of {warps} warps × {events} events", words.len()));
    }
    let mut out = Vec::new();
    for (i, chunk) in words.chunks(events).enumerate() {
        let used: Vec<u64> = chunk.iter().copied().take_while(|&w| w != 0).collect();
        let Some((&first, rest)) = used.split_first() else { continue };
        let (block, warp) = (i / warps, i % warps);
        let tag = |w: u64| {
            let code = (w >> VALUE_BITS) as u8;
            Tag::from_code(code).ok_or_else(|| format!("block {block} warp {warp}: unknown trace tag {code}"))
        };
        if tag(first)? != Tag::Sm {
            return Err(format!("block {block} warp {warp}: the first event is not the SM"));
        }
        let events = rest.iter().map(|&w| Ok((tag(w)?, w & VALUE_MASK))).collect::<Result<Vec<_>, String>>()?;
        out.push(WarpTrace { block, warp, sm: (first & VALUE_MASK) as u32, events, full: used.len() == chunk.len() });
    }
    Ok(out)
}

/// Cycles between consecutive marks of the given warps, by the pair of marks (from, to).
pub fn steps<'a>(warps: impl IntoIterator<Item = &'a WarpTrace>) -> BTreeMap<(Tag, Tag), Vec<u64>> {
    let mut out: BTreeMap<(Tag, Tag), Vec<u64>> = BTreeMap::new();
    for w in warps {
        for pair in w.events.windows(2) {
            let ((from, t0), (to, t1)) = (pair[0], pair[1]);
            out.entry((from, to)).or_default().push(t1.wrapping_sub(t0) & VALUE_MASK);
        }
    }
    out
}

/// Cycles from each `tag` to the warp's next `tag` (e.g. turn to turn: a consumer's period).
pub fn periods<'a>(warps: impl IntoIterator<Item = &'a WarpTrace>, tag: Tag) -> Vec<u64> {
    let mut out = Vec::new();
    for w in warps {
        let stamps: Vec<u64> = w.events.iter().filter(|(t, _)| *t == tag).map(|(_, c)| *c).collect();
        out.extend(stamps.windows(2).map(|p| p[1].wrapping_sub(p[0]) & VALUE_MASK));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_splits_warps_and_skips_silent_ones() {
        // 2 blocks × 2 warps × 4 events. Block 0 warp 0: SM 7, then two marks; warp 1 is full;
        // block 1 stamped nothing (not traced).
        let mut words = vec![0u64; 16];
        words[..3].copy_from_slice(&[word(Tag::Sm, 7), word(Tag::Turn, 100), word(Tag::Issued, 130)]);
        words[4..8].copy_from_slice(&[
            word(Tag::Sm, 7),
            word(Tag::ProducerTile, 5),
            word(Tag::ProducerK, 9),
            word(Tag::ProducerV, 20),
        ]);
        let traces = decode(&words, 2, 4).unwrap();
        assert_eq!(traces.len(), 2);
        assert_eq!(traces[0].sm, 7);
        assert_eq!(traces[0].events, [(Tag::Turn, 100), (Tag::Issued, 130)]);
        assert!(!traces[0].full && !traces[0].is_producer());
        assert_eq!((traces[1].block, traces[1].warp), (0, 1));
        assert!(traces[1].full && traces[1].is_producer());
    }

    #[test]
    fn decode_refuses_a_foreign_format() {
        assert!(decode(&[0; 10], 2, 4).unwrap_err().contains("not whole blocks"));
        let bad_tag = [word(Tag::Sm, 1), 200 << VALUE_BITS, 0, 0];
        assert!(decode(&bad_tag, 1, 4).unwrap_err().contains("unknown trace tag 200"));
        let no_sm = [word(Tag::Turn, 1), 0, 0, 0];
        assert!(decode(&no_sm, 1, 4).unwrap_err().contains("not the SM"));
    }

    #[test]
    fn steps_and_periods_measure_between_consecutive_marks() {
        // Two key blocks: turn at 0 and 1000; issue takes 20, S 300 more.
        let w = WarpTrace {
            block: 0,
            warp: 4,
            sm: 0,
            events: vec![
                (Tag::Turn, 0),
                (Tag::Issued, 20),
                (Tag::SDone, 320),
                (Tag::Turn, 1000),
                (Tag::Issued, 1030),
                (Tag::SDone, 1330),
            ],
            full: false,
        };
        let s = steps([&w]);
        assert_eq!(s[&(Tag::Turn, Tag::Issued)], [20, 30]);
        assert_eq!(s[&(Tag::Issued, Tag::SDone)], [300, 300]);
        assert_eq!(s[&(Tag::SDone, Tag::Turn)], [680]);
        assert_eq!(periods([&w], Tag::Turn), [1000]);
        assert_eq!(periods([&w], Tag::Epilogue), Vec::<u64>::new());
    }

    #[test]
    fn tags_match_the_kernel_header() {
        let header = crate::kernels::HEADERS.iter().find(|h| h.name == "trace.cuh").unwrap().text;
        let mut seen = 0;
        for line in header.lines().map(str::trim).filter(|l| l.starts_with("TRACE_") && l.contains(" = ")) {
            let (name, rest) = line.split_once(" = ").unwrap();
            let code: u8 = rest.split(',').next().unwrap().trim().parse().unwrap();
            let tag = Tag::from_code(code).unwrap_or_else(|| panic!("{name} = {code} has no Tag"));
            let camel: String =
                name["TRACE_".len()..].split('_').map(|w| w[..1].to_string() + &w[1..].to_ascii_lowercase()).collect();
            assert_eq!(format!("{tag:?}"), camel, "{name} = {code}");
            seen += 1;
        }
        assert_eq!(seen, Tag::ALL.len());
        assert!(header.contains(&format!("#define TRACE_VALUE_BITS {VALUE_BITS}")));
    }

    #[test]
    fn every_tag_round_trips_its_code() {
        for t in Tag::ALL {
            assert_eq!(Tag::from_code(t as u8), Some(t));
        }
        assert_eq!(Tag::from_code(0), None);
    }
}
