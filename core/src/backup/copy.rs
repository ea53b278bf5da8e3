//! Copying objects between stores with their checksum checked, at a rate.
//!
//! Invariant: a copy whose bytes do not have the expected CRC32 stores nothing (its writer
//! is dropped unfinished); a rate-limited copy runs ahead of its rate by at most one chunk.

use crate::error::{Error, Result};
use crate::objects::{Objects, PutMode};
use std::time::{Duration, Instant};

/// How much a copy reads and writes at a time.
const CHUNK: u64 = 1 << 20;

/// Reads object `name` of `objects` a chunk at a time, handing each chunk to `each`; returns
/// the object's size and CRC32.
fn read_chunks(
    objects: &dyn Objects,
    name: &str,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<(u64, u32)> {
    let file = objects.open(name)?;
    let size = file.size()?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = Vec::new();
    let mut at = 0;
    while at < size {
        let len = (size - at).min(CHUNK);
        buf.resize(len as usize, 0);
        file.read_exact_at(&mut buf, at)?;
        h.update(&buf);
        each(&buf)?;
        at += len;
    }
    Ok((size, h.finalize()))
}

/// The size and CRC32 of object `name`, read a chunk at a time.
pub(crate) fn checksum(objects: &dyn Objects, name: &str) -> Result<(u64, u32)> {
    read_chunks(objects, name, |_| Ok(()))
}

/// How [`copy`] meets an object already stored under its target name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Replaces it (a backup found it damaged).
    Replace,
    /// Fails: the target directory is written by this copy alone.
    Exclusive,
}

/// Copies object `from` of `source` to `to` of `target`, a chunk at a time at `pace`; fails
/// with [`Error::Corruption`], storing nothing, when the bytes read do not have checksum
/// `crc32`.
pub(crate) fn copy(
    source: &dyn Objects,
    from: &str,
    target: &dyn Objects,
    to: &str,
    crc32: u32,
    mode: Existing,
    pace: &mut Pace,
) -> Result<()> {
    let mut out = target.writer(to)?;
    let (_, got) = read_chunks(source, from, |chunk| {
        out.write_all(chunk)?;
        pace.account(chunk.len() as u64);
        Ok(())
    })?;
    if got != crc32 {
        return Err(Error::corruption(
            source.locate(from),
            0,
            format!("changed while copied: checksum {got:08x}, expected {crc32:08x}"),
        ));
    }
    let put = match mode {
        Existing::Replace => PutMode::Overwrite,
        Existing::Exclusive => PutMode::Create,
    };
    Ok(out.finish(put)?)
}

/// A rate limit: after `n` bytes at `rate` bytes a second, waits until `n / rate` seconds
/// have passed since the start.
pub(crate) struct Pace {
    rate: Option<u64>,
    start: Instant,
    bytes: u64,
}

impl Pace {
    pub(crate) fn new(rate: Option<u64>) -> Self {
        Pace {
            rate: rate.filter(|r| *r > 0),
            start: Instant::now(),
            bytes: 0,
        }
    }

    fn account(&mut self, n: u64) {
        self.bytes += n;
        if let Some(rate) = self.rate {
            let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(self.start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
}
