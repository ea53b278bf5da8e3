//! Unit tests of the endpoint fan-out.
#![allow(clippy::unwrap_used)]
use super::*;

fn inc(s: &str) -> Bound<Bytes> {
    Bound::Included(Bytes::copy_from_slice(s.as_bytes()))
}
fn exc(s: &str) -> Bound<Bytes> {
    Bound::Excluded(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn intersect_takes_the_tighter_bounds() {
    let a = RowRange {
        lo: inc("b"),
        hi: exc("m"),
    };
    let b = RowRange {
        lo: exc("b"),
        hi: Bound::Unbounded,
    };
    let c = a.intersect(&b);
    assert_eq!(c.lo, exc("b"));
    assert_eq!(c.hi, exc("m"));
    let d = a.intersect(&RowRange {
        lo: Bound::Unbounded,
        hi: inc("m"),
    });
    assert_eq!(d.hi, exc("m"));
    assert_eq!(d.lo, inc("b"));
    assert!(!d.is_empty());
    let e = a.intersect(&RowRange {
        lo: inc("m"),
        hi: Bound::Unbounded,
    });
    assert!(e.is_empty());
    assert!(RowRange {
        lo: exc("a"),
        hi: Bound::Excluded(Bytes::from_static(b"a\0")),
    }
    .is_empty());
    assert!(RowRange::all().intersect(&RowRange::all()) == RowRange::all());
}
