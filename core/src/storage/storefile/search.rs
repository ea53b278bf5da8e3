//! Cache-friendly binary search over sorted keys: "heads" of rows after a shared prefix.
//!
//! In a sorted run of keys every row starts with the common prefix of the first and last
//! rows. For each key we keep its *head*: the next 8 row bytes after that prefix as a
//! big-endian `u64`, zero padded. If two heads differ, the rows (hence the keys) are ordered
//! the same way, so a binary search can compare the compact `u64` array and look at the
//! full key (usually in another cache line) only when heads tie. Data blocks and the block
//! index both search this way.

use crate::cell::StoreKey;
use std::cmp::Ordering;

/// The first 8 bytes of `rest` as a big-endian `u64`, zero padded.
#[inline]
pub(crate) fn head(rest: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = rest.len().min(8);
    b[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(b)
}

/// The length of the common prefix of `a` and `b`.
pub(crate) fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The head of `row` after a prefix of `shared` bytes (0 if `row` is not longer).
#[inline]
pub(crate) fn head_after(row: &[u8], shared: usize) -> u64 {
    head(row.get(shared..).unwrap_or_default())
}

/// The number of leading keys for which `pred(key_i.cmp(key))` holds, where `prefix` is the
/// prefix shared by every row, `heads[i]` is key `i`'s head after it, and `full(i)` compares
/// key `i` with `key` in full. `pred` must hold for a leading run of keys only.
#[inline]
pub(crate) fn partition<E>(
    prefix: &[u8],
    heads: &[u64],
    key: &StoreKey,
    mut full: impl FnMut(usize) -> Result<Ordering, E>,
    pred: impl Fn(Ordering) -> bool,
) -> Result<usize, E> {
    let row = &key.row[..];
    let n = prefix.len().min(row.len());
    let everything = |o| if pred(o) { heads.len() } else { 0 };
    match row[..n].cmp(&prefix[..n]) {
        // Every key here is greater than `key`, or every key is smaller.
        Ordering::Less => return Ok(everything(Ordering::Greater)),
        Ordering::Greater => return Ok(everything(Ordering::Less)),
        // `row` is a proper prefix of every row here, so it sorts before all of them.
        Ordering::Equal if n < prefix.len() => return Ok(everything(Ordering::Greater)),
        Ordering::Equal => {}
    }
    let key_head = head(&row[n..]);
    // Heads below `key_head` are smaller keys, heads above it greater ones; only the run of
    // equal heads needs full comparisons.
    let mut lo = lower_bound_u64(heads, key_head);
    let mut hi = lo + equal_run(&heads[lo..], key_head);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(full(mid)?) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The index of the first element `>= key` in the sorted `v`.
///
/// A 4-way search: the three probes of a round are independent loads, so the CPU overlaps
/// their cache misses (about half the dependent misses of a binary search).
#[inline]
fn lower_bound_u64(v: &[u64], key: u64) -> usize {
    let (mut lo, mut hi) = (0usize, v.len());
    // The answer is always in `lo ..= hi`.
    while hi - lo > 8 {
        let step = (hi - lo) / 4;
        let (a, b, c) = (lo + step, lo + 2 * step, lo + 3 * step);
        let (la, lb, lc) = (v[a] < key, v[b] < key, v[c] < key);
        if lc {
            lo = c + 1;
        } else if lb {
            (lo, hi) = (b + 1, c);
        } else if la {
            (lo, hi) = (a + 1, b);
        } else {
            hi = a;
        }
    }
    while lo < hi && v[lo] < key {
        lo += 1;
    }
    lo
}

/// The length of the leading run of `key` in the sorted `v` (galloping: cheap for short
/// runs, logarithmic for long ones).
#[inline]
fn equal_run(v: &[u64], key: u64) -> usize {
    if v.first() != Some(&key) {
        return 0;
    }
    // v[..=known] are all `key`; find the end by doubling, then bisect.
    let mut known = 0usize;
    let mut step = 1usize;
    loop {
        let probe = known + step;
        if probe >= v.len() || v[probe] != key {
            let end = probe.min(v.len());
            return known + 1 + v[known + 1..end].partition_point(|&h| h == key);
        }
        known = probe;
        step *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_order_like_rows() {
        let rows: [&[u8]; 6] = [b"", b"\0", b"a", b"a\0", b"abcdefgh", b"abcdefgh\x01"];
        for a in rows {
            for b in rows {
                let (ha, hb) = (head(a), head(b));
                if ha != hb {
                    assert_eq!(ha.cmp(&hb), a.cmp(b), "{a:?} vs {b:?}");
                }
            }
        }
        assert_eq!(shared_prefix(b"abc", b"abd"), 2);
        assert_eq!(head_after(b"ab", 5), 0);
    }

    proptest::proptest! {
        #[test]
        fn u64_searches_match_linear(
            mut v in proptest::collection::vec(0u64..20, 0..300),
            key in 0u64..21,
        ) {
            v.sort_unstable();
            let lo = v.iter().filter(|&&x| x < key).count();
            proptest::prop_assert_eq!(lower_bound_u64(&v, key), lo);
            let run = v.iter().filter(|&&x| x == key).count();
            proptest::prop_assert_eq!(equal_run(&v[lo..], key), run);
        }
    }
}
