//! Codec properties: round trips, and no panic on any input bytes.

use super::super::record::{
    decode_payload, encode_frame, payload_len, read_frame, EditRef, Frame, UnsealedFrame,
};
use super::super::{WalEdit, WalRecord};
use super::rec;
use crate::cell::{CellType, StoreCell, StoreKey};
use bytes::Bytes;
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn record() -> impl Strategy<Value = WalRecord> {
    let kind = prop_oneof![
        Just(CellType::Put),
        Just(CellType::Delete),
        Just(CellType::DeleteFamilyVersion),
        Just(CellType::DeleteColumn),
        Just(CellType::DeleteFamily),
    ];
    let edit = (
        any::<u64>(),
        bytes(8),
        bytes(24),
        bytes(16),
        any::<u64>(),
        kind,
        bytes(300),
    );
    (any::<u64>(), proptest::collection::vec(edit, 0..6)).prop_map(|(seq, edits)| WalRecord {
        seq,
        edits: edits
            .into_iter()
            .map(
                |(region_id, family, row, qualifier, ts, kind, value)| WalEdit {
                    region_id,
                    family,
                    cell: StoreCell {
                        key: StoreKey {
                            row,
                            qualifier,
                            ts,
                            kind,
                            seq,
                        },
                        value,
                    },
                },
            )
            .collect(),
    })
}

fn frame(r: &WalRecord) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_frame(r, &mut buf);
    buf
}

/// Wraps `payload` in a frame with a correct length and checksum.
fn framed(payload: &[u8]) -> Vec<u8> {
    let mut buf = (payload.len() as u32).to_be_bytes().to_vec();
    buf.extend_from_slice(&crc32fast::hash(payload).to_be_bytes());
    buf.extend_from_slice(payload);
    buf
}

proptest! {
    #[test]
    fn round_trip(r in record()) {
        let buf = frame(&r);
        prop_assert_eq!(buf.len(), 8 + payload_len(&r));
        match read_frame(&buf) {
            Frame::Record { record, len } => {
                prop_assert_eq!(len, buf.len());
                prop_assert_eq!(record, r);
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn a_frame_sealed_after_encoding_equals_the_one_pass_frame(r in record(), seq in any::<u64>()) {
        // Encoded with the edits' seqs ignored, sealed with the record's: every seq width
        // (1 to 10 varint bytes) lands the same frame as the reference encoder.
        let mut unsealed = UnsealedFrame::encode(r.edits.iter().map(EditRef::of)).unwrap();
        let r = WalRecord { seq, ..r };
        let reference = frame(&r);
        prop_assert_eq!(unsealed.seal(seq), &reference[..]);
        // Sealing again (a retried commit under a new seq) rewrites the slot cleanly.
        let r2 = WalRecord { seq: seq / 3, ..r };
        prop_assert_eq!(unsealed.seal(seq / 3), &frame(&r2)[..]);
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read_frame(&data);
        let _ = decode_payload(&data);
        // Past the checksum too, so the payload decoder sees the garbage.
        let _ = read_frame(&framed(&data));
    }

    #[test]
    fn mutated_payloads_never_panic(r in record(), pos in any::<usize>(), byte in any::<u8>()) {
        let buf = frame(&r);
        let mut payload = buf[8..].to_vec();
        if !payload.is_empty() {
            let i = pos % payload.len();
            payload[i] = byte;
        }
        let _ = read_frame(&framed(&payload));
        let cut = pos % buf.len();
        prop_assert!(matches!(read_frame(&buf[..cut]), Frame::Torn(_) | Frame::End));
    }
}

#[test]
fn every_flipped_byte_is_detected() {
    let buf = frame(&rec(42, 3));
    for i in 0..buf.len() {
        let mut bad = buf.clone();
        bad[i] ^= 0x10;
        assert!(
            !matches!(read_frame(&bad), Frame::Record { .. } | Frame::End),
            "flip at {i} not detected"
        );
    }
}

#[test]
fn malformed_payloads_are_corrupt() {
    let absurd = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
    assert!(matches!(read_frame(&absurd), Frame::Corrupt(_)));
    // Zero-filled tail: a zero-length payload has CRC 0 but does not decode.
    assert!(matches!(read_frame(&[0; 16]), Frame::Corrupt(_)));
    // Unknown type code.
    let mut payload = frame(&rec(5, 1))[8..].to_vec();
    let code_at = payload.len() - 17; // type code, value length, 15-byte value of rec(5, _)
    assert_eq!(payload[code_at], CellType::Put.code());
    payload[code_at] = 99;
    assert!(matches!(read_frame(&framed(&payload)), Frame::Corrupt(r) if r.contains("type")));
    // Trailing garbage, overflowing varint, absurd edit count.
    let mut trailing = frame(&rec(5, 1))[8..].to_vec();
    trailing.push(0);
    assert!(decode_payload(&trailing).is_err());
    assert!(decode_payload(&[0xff; 11]).is_err());
    assert!(decode_payload(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
}
