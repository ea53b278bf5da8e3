//! The bounds that make decoding a [`Filter`] from untrusted bytes safe: a nesting limit and
//! capped preallocation.
//!
//! A filter is a tree, and serde decodes it by recursion: without a limit, 40 KB of nested
//! `WhileMatch` or `List` headers overflow the stack and abort the process. Every field
//! through which a filter nests another (`WhileMatch`, `Skip`, `List`) is therefore decoded
//! by [`nested_box`] or [`nested_list`], which count the levels open on this thread and fail
//! past [`MAX_FILTER_DEPTH`]. The count is per thread because serde gives a `Deserialize`
//! impl no state of its own; decoding is synchronous, so one decode runs on one thread from
//! start to end, and a guard closes each level on every way out (error and unwind too).
//!
//! Lengths read from the input (the element counts of the filter's `Vec`s) are never used to
//! allocate more than [`PREALLOC`] elements ahead of the elements actually decoded: a short
//! input claiming billions of elements fails at its end having allocated next to nothing.
//! (Byte strings and strings are safe already: postcard checks their length against the
//! remaining input before copying.)
//!
//! Invariant: every filter [`Filter::to_bytes`] encodes, [`Filter::from_bytes`] decodes
//! back, because the encoder refuses what the decoder would: a filter deeper than
//! [`MAX_FILTER_DEPTH`] ([`Filter::depth`]). The filter language parser keeps the same
//! limit.

use super::{Filter, MAX_FILTER_DEPTH};
use crate::error::{Error, Result};
use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

/// The most elements a decoded `Vec` reserves before its elements are read.
const PREALLOC: usize = 16;

/// The nesting state of the decode running on this thread.
#[derive(Clone, Copy, Default)]
struct Nesting {
    /// Nested fields open: the filter being decoded is at level `open + 1`.
    open: usize,
    /// Set when a decode went past the limit (read and cleared by [`decode`]).
    exceeded: bool,
}

thread_local! {
    static NESTING: Cell<Nesting> = const { Cell::new(Nesting { open: 0, exceeded: false }) };
}

fn too_deep() -> String {
    format!("filter nested deeper than the limit of {MAX_FILTER_DEPTH} levels")
}

/// One open level of nesting; closes it when dropped.
struct Level;

impl Level {
    /// Opens a level for a filter nested in the one being decoded, or fails when that
    /// filter would be deeper than [`MAX_FILTER_DEPTH`].
    fn enter<E: serde::de::Error>() -> std::result::Result<Level, E> {
        NESTING.with(|n| {
            let mut s = n.get();
            // The nested filter's level: one below the one being decoded.
            if s.open + 2 > MAX_FILTER_DEPTH {
                s.exceeded = true;
                n.set(s);
                return Err(E::custom(too_deep()));
            }
            s.open += 1;
            n.set(s);
            Ok(Level)
        })
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        NESTING.with(|n| {
            let mut s = n.get();
            s.open = s.open.saturating_sub(1);
            n.set(s);
        });
    }
}

/// Decodes the filter a `WhileMatch` or `Skip` wraps, one level deeper.
pub(super) fn nested_box<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Box<Filter>, D::Error> {
    let _level = Level::enter::<D::Error>()?;
    Filter::deserialize(d).map(Box::new)
}

/// Decodes the filters of a `List`, one level deeper. The limit applies to the filters
/// the list holds: an empty list adds no level (as [`depth`] counts it).
pub(super) fn nested_list<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<Filter>, D::Error> {
    struct Filters;

    impl<'de> Visitor<'de> for Filters {
        type Value = Vec<Filter>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a sequence of filters")
        }

        fn visit_seq<A: SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<Vec<Filter>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(PREALLOC));
            let mut _level = None;
            loop {
                // The level opens before the first element, so only a list that holds
                // filters can pass the limit.
                if _level.is_none() && seq.size_hint() != Some(0) {
                    _level = Some(Level::enter::<A::Error>()?);
                }
                match seq.next_element()? {
                    Some(x) => out.push(x),
                    None => return Ok(out),
                }
            }
        }
    }

    d.deserialize_seq(Filters)
}

/// Decodes a sequence, reserving at most [`PREALLOC`] elements ahead of those read.
pub(super) fn capped_vec<'de, D, T>(d: D) -> std::result::Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Capped<T>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Visitor<'de> for Capped<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a sequence")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(PREALLOC));
            while let Some(x) = seq.next_element()? {
                out.push(x);
            }
            Ok(out)
        }
    }

    d.deserialize_seq(Capped(PhantomData))
}

/// The filter's postcard bytes; refuses a filter deeper than [`MAX_FILTER_DEPTH`], which
/// [`decode`] could not read back.
pub(super) fn encode(f: &Filter) -> Result<Vec<u8>> {
    if f.depth() > MAX_FILTER_DEPTH {
        return Err(Error::bad_argument(format!(
            "filter encoding: {}",
            too_deep()
        )));
    }
    postcard::to_allocvec(f).map_err(|e| Error::bad_argument(format!("filter encoding: {e}")))
}

/// A filter from postcard bytes, within the bounds of the module doc.
pub(super) fn decode(bytes: &[u8]) -> Result<Filter> {
    let clear = |n: &Cell<Nesting>| {
        let mut s = n.get();
        let exceeded = s.exceeded;
        s.exceeded = false;
        n.set(s);
        exceeded
    };
    NESTING.with(clear);
    let out = postcard::from_bytes(bytes);
    let exceeded = NESTING.with(clear);
    out.map_err(|e| {
        // postcard drops the message of a custom error: say which bound was hit.
        let why = if exceeded { too_deep() } else { e.to_string() };
        Error::bad_argument(format!("filter decoding: {why}"))
    })
}

/// The nesting depth of `f` (a filter without inner filters is 1), without recursion, so
/// that even a filter built too deep to encode is measured safely.
pub(super) fn depth(f: &Filter) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(f, 1usize)];
    while let Some((f, level)) = stack.pop() {
        deepest = deepest.max(level);
        match f {
            Filter::WhileMatch(inner) | Filter::Skip(inner) => stack.push((inner, level + 1)),
            Filter::List(_, fs) => stack.extend(fs.iter().map(|x| (x, level + 1))),
            _ => {}
        }
    }
    deepest
}
