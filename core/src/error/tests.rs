//! [`ErrorWire`]: every variant round-trips, through postcard too; hostile bytes are refused
//! without panicking.

use super::wire::MAX_ERROR_DEPTH;
use super::*;
use proptest::prelude::*;
use std::io::ErrorKind;

/// The number of `Error` variants ([`variant`] numbers them).
const VARIANTS: usize = 37;

/// The variant's number: a match with no wildcard, so a new variant fails to compile here
/// until [`one_of_each`] has a value of it.
fn variant(e: &Error) -> usize {
    match e {
        Error::TableNotFound(_) => 0,
        Error::TableExists(_) => 1,
        Error::SnapshotNotFound(_) => 2,
        Error::SnapshotExists(_) => 3,
        Error::TableDisabled(_) => 4,
        Error::TableState { .. } => 5,
        Error::RegionNotFound { .. } => 6,
        Error::RegionOffline { .. } => 7,
        Error::RegionNotServed { .. } => 8,
        Error::NamespaceNotFound(_) => 9,
        Error::NamespaceExists(_) => 10,
        Error::FamilyNotFound { .. } => 11,
        Error::InvalidRow(_) => 12,
        Error::ValueTooLarge { .. } => 13,
        Error::BadArgument(_) => 14,
        Error::NotACounter { .. } => 15,
        Error::Io(_) => 16,
        Error::Corruption { .. } => 17,
        Error::WalCorruption { .. } => 18,
        Error::WritesRefused(_) => 19,
        Error::Closed => 20,
        Error::Fenced { .. } => 21,
        Error::LeaseExpired { .. } => 22,
        Error::RegionOwned { .. } => 23,
        Error::CoordinationConflict(_) => 24,
        Error::Busy(_) => 25,
        Error::Coprocessor { .. } => 26,
        Error::PluginFault { .. } => 27,
        Error::PluginNotFound(_) => 28,
        Error::InvalidAddedMutation { .. } => 29,
        Error::RowLockTimeout { .. } => 30,
        Error::UniqueViolation { .. } => 31,
        Error::IndexNotReady(_) => 32,
        Error::IndexTableWrite(_) => 33,
        Error::IndexNotFound(_) => 34,
        Error::ReadOnlyTable { .. } => 35,
        Error::FilterParse { .. } => 36,
    }
}

/// One error of every variant, each field set to something other than a default.
fn one_of_each() -> Vec<Error> {
    vec![
        Error::TableNotFound("ns:t".into()),
        Error::TableExists("ns:t".into()),
        Error::SnapshotNotFound("snap-1".into()),
        Error::SnapshotExists("snap-1".into()),
        Error::TableDisabled("ns:t".into()),
        Error::TableState {
            table: "ns:t".into(),
            expected: "disabled",
        },
        Error::RegionNotFound {
            table: "ns:t".into(),
            id: 42,
        },
        Error::RegionOffline {
            table: "ns:t".into(),
            region: 7,
            file: "data/0000000000000007.sf".into(),
            reason: "missing".into(),
        },
        Error::RegionNotServed {
            table: "ns:t".into(),
            region: u64::MAX,
        },
        Error::NamespaceNotFound("ns".into()),
        Error::NamespaceExists("ns".into()),
        Error::FamilyNotFound {
            table: "ns:t".into(),
            family: "f\u{fffd}".into(),
        },
        Error::InvalidRow("row key is empty".into()),
        Error::ValueTooLarge {
            size: 10_485_761,
            limit: 10_485_760,
        },
        Error::BadArgument("bad".into()),
        Error::NotACounter {
            column: "f:q".into(),
            len: 3,
        },
        Error::Io(std::io::Error::new(ErrorKind::NotFound, "no such object")),
        Error::corruption("data/0000000000000001.sf", 4096, "bad CRC"),
        Error::WalCorruption {
            segment: "wal/0000000000000003.log".into(),
            offset: 77,
            reason: "torn record".into(),
            tables: vec!["default:a".into(), "ns:b".into()],
        },
        Error::WritesRefused("WAL sync failed".into()),
        Error::Closed,
        Error::Fenced {
            writer: "wal/server-1".into(),
            segment: 9,
        },
        Error::LeaseExpired { lease: 1234 },
        Error::RegionOwned {
            region: "ns:t/5".into(),
            owner: "server-2".into(),
        },
        Error::CoordinationConflict("revision moved".into()),
        Error::Busy("memstore full".into()),
        Error::Coprocessor {
            name: "audit".into(),
            msg: "refused".into(),
        },
        Error::PluginFault {
            name: "plugin:abc".into(),
            msg: "trap".into(),
        },
        Error::PluginNotFound("abc".into()),
        Error::InvalidAddedMutation {
            table: "ns:idx".into(),
            reason: Box::new(Error::TableDisabled("ns:idx".into())),
        },
        Error::RowLockTimeout {
            table: "ns:t".into(),
            row: "r1".into(),
            waited_ms: 5000,
        },
        Error::UniqueViolation {
            table: "ns:idx".into(),
            row: "k".into(),
        },
        Error::IndexNotReady("by_email".into()),
        Error::IndexTableWrite("ns:idx".into()),
        Error::IndexNotFound("by_name".into()),
        Error::ReadOnlyTable {
            table: "ns:t".into(),
            missing: vec!["audit".into(), "index".into()],
        },
        Error::FilterParse {
            pos: 12,
            msg: "expected `(`".into(),
        },
    ]
}

/// `e` through its wire form and postcard's bytes.
fn through_postcard(e: &Error) -> Error {
    let bytes = postcard::to_allocvec(&ErrorWire::from(e)).unwrap();
    Error::from(postcard::from_bytes::<ErrorWire>(&bytes).unwrap())
}

#[test]
fn every_variant_round_trips() {
    let all = one_of_each();
    let mut seen = [false; VARIANTS];
    for e in &all {
        seen[variant(e)] = true;
        for back in [Error::from(ErrorWire::from(e)), through_postcard(e)] {
            assert_eq!(variant(&back), variant(e), "{e:?}");
            assert_eq!(back.to_string(), e.to_string());
            match (e, &back) {
                (Error::Io(a), Error::Io(b)) => assert_eq!(a.kind(), b.kind()),
                // Every field kept: the Debug forms are equal.
                _ => assert_eq!(format!("{back:?}"), format!("{e:?}")),
            }
        }
    }
    assert!(seen.iter().all(|s| *s), "a variant has no value: {seen:?}");
}

#[test]
fn table_state_maps_back_to_the_engines_strings() {
    for expected in ["enabled", "disabled", "offline"] {
        let e = Error::TableState {
            table: "t".into(),
            expected,
        };
        let Error::TableState { expected: back, .. } = through_postcard(&e) else {
            panic!("variant changed");
        };
        let want = if expected == "offline" {
            "another state"
        } else {
            expected
        };
        assert_eq!(back, want);
    }
}

#[test]
fn io_errors_keep_their_kind_and_text() {
    let os = std::io::Error::from_raw_os_error(2); // ENOENT: "No such file or directory"
    let kinds = [
        ErrorKind::NotFound,
        ErrorKind::PermissionDenied,
        ErrorKind::TimedOut,
        ErrorKind::UnexpectedEof,
        ErrorKind::StorageFull,
        ErrorKind::Other,
    ];
    let mut errors: Vec<std::io::Error> = kinds
        .iter()
        .map(|k| std::io::Error::new(*k, "boom"))
        .collect();
    errors.push(os);
    errors.push(std::io::Error::from(ErrorKind::BrokenPipe));
    for io in errors {
        let (kind, text) = (io.kind(), io.to_string());
        let Error::Io(back) = through_postcard(&Error::Io(io)) else {
            panic!("variant changed");
        };
        assert_eq!((back.kind(), back.to_string()), (kind, text));
    }
    // A code this build does not know reads as Other.
    let wire = ErrorWire::Io {
        kind: 200,
        message: "from a newer peer".into(),
    };
    let Error::Io(back) = Error::from(wire) else {
        panic!("variant changed");
    };
    assert_eq!(back.kind(), ErrorKind::Other);
}

/// An `InvalidAddedMutation` chain `levels` deep (the outermost error is level 1).
fn chain(levels: usize) -> Error {
    let mut e = Error::Closed;
    for i in 1..levels {
        e = Error::InvalidAddedMutation {
            table: format!("t{i}"),
            reason: Box::new(e),
        };
    }
    e
}

#[test]
fn nesting_is_bounded_both_ways() {
    // As deep as allowed: kept whole.
    let e = chain(MAX_ERROR_DEPTH);
    assert_eq!(format!("{:?}", through_postcard(&e)), format!("{e:?}"));
    // Deeper: the deepest level kept travels as a BadArgument of its text, so the chain
    // still decodes, saying the same behind one "bad argument: ".
    let e = chain(MAX_ERROR_DEPTH + 5);
    let back = through_postcard(&e);
    assert_eq!(
        back.to_string().replacen("bad argument: ", "", 1),
        e.to_string()
    );
    let mut levels = 1;
    let mut at = &back;
    while let Error::InvalidAddedMutation { reason, .. } = at {
        levels += 1;
        at = reason;
    }
    assert_eq!(levels, MAX_ERROR_DEPTH);
    assert!(matches!(at, Error::BadArgument(_)));
    // Hostile bytes nesting far deeper are refused, not a stack overflow: the encoding of
    // a level-2 chain repeats its header.
    let one = postcard::to_allocvec(&ErrorWire::from(&chain(2))).unwrap();
    let leaf = postcard::to_allocvec(&ErrorWire::Closed).unwrap();
    let header = &one[..one.len() - leaf.len()];
    let mut deep = header.repeat(100_000);
    deep.extend_from_slice(&leaf);
    assert!(postcard::from_bytes::<ErrorWire>(&deep).is_err());
    // The count closed its levels: a legal chain still decodes afterwards.
    let ok = postcard::to_allocvec(&ErrorWire::from(&chain(MAX_ERROR_DEPTH))).unwrap();
    assert!(postcard::from_bytes::<ErrorWire>(&ok).is_ok());
}

proptest! {
    /// Arbitrary bytes decode to an error or fail, never panic; what decodes converts and
    /// displays.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(w) = postcard::from_bytes::<ErrorWire>(&bytes) {
            let e = Error::from(w);
            let _ = e.to_string();
            let _ = ErrorWire::from(&e);
        }
    }
}
