//! Order-preserving composite row keys: a tuple of typed values becomes bytes whose unsigned
//! lexicographic order (the order HBase and Basalt sort rows in) is the tuple's order.
//!
//! Written by hand rather than taken from a crate: the encodings that exist (`storekey`,
//! `bytekey`, FoundationDB's tuple layer) either lack per-component descending order, or
//! encode integers with variable widths that the seeds' fixed-width keys and shell-readable
//! prefixes do not want, or are not kept. The format is small and fully specified here.
//!
//! Format of one component (bytes appended to the key in field order):
//!
//! | kind | ascending bytes |
//! | --- | --- |
//! | `u8`..`u64` | the value, big-endian, fixed width (1, 2, 4, 8 bytes) |
//! | `i8`..`i64` | the value with its sign bit flipped, big-endian, fixed width |
//! | fixed bytes of width `w` | the `w` bytes as they are |
//! | bytes, string (UTF-8) | every `0x00` written as `0x00 0xFF`, then the terminator `0x00 0x01` |
//!
//! A *descending* component writes the ascending bytes with every bit inverted. A *nullable*
//! component starts with a marker byte that is never inverted: `0x00` for null (nothing
//! follows), `0x01` before a value; so null sorts first in both directions (`NULLS FIRST`).
//!
//! Invariants (checked by the property tests below): for two tuples of one schema, the byte
//! order of their encodings equals the tuple order (component by component, each in its own
//! direction, null first); every component's encoding is prefix-free, which is what makes the
//! order of a concatenation the order of the tuple and lets inversion reverse it; decoding an
//! encoding gives the tuple back; decoding never panics on arbitrary bytes, it answers
//! [`Error::BadArgument`].

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The direction one component sorts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Order {
    /// Smaller values first.
    #[default]
    Asc,
    /// Larger values first (bytes inverted).
    Desc,
}

/// The type of one key component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Bytes of exactly this many bytes (e.g. an MD5 digest, a padded mobile number).
    Fixed(u32),
    /// Bytes of any length (escaped and terminated).
    Bytes,
    /// A UTF-8 string of any length (escaped and terminated; sorts by its bytes).
    Str,
}

/// One component value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// Null (only in a nullable field).
    Null,
    /// A `u8`.
    U8(u8),
    /// A `u16`.
    U16(u16),
    /// A `u32`.
    U32(u32),
    /// A `u64`.
    U64(u64),
    /// An `i8`.
    I8(i8),
    /// An `i16`.
    I16(i16),
    /// An `i32`.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// Fixed-width bytes.
    Fixed(Vec<u8>),
    /// Variable-length bytes.
    Bytes(Vec<u8>),
    /// A string.
    Str(String),
}

/// One field of a key schema: its kind, direction and whether it may be null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// The component's type.
    pub kind: Kind,
    /// Its direction.
    pub order: Order,
    /// Whether it may be [`Value::Null`].
    pub nullable: bool,
}

impl Field {
    /// An ascending, non-null field.
    pub fn new(kind: Kind) -> Self {
        Field {
            kind,
            order: Order::Asc,
            nullable: false,
        }
    }
    /// The same field, descending.
    pub fn desc(mut self) -> Self {
        self.order = Order::Desc;
        self
    }
    /// The same field, nullable (null first).
    pub fn nullable(mut self) -> Self {
        self.nullable = true;
        self
    }
}

/// The layout of a composite key: its fields in order.
///
/// ```
/// use basalt_core::keys::{Field, Kind, KeySchema, Value};
/// // seed 000: conversation id | message id, newest message first
/// let schema = KeySchema::new(vec![Field::new(Kind::U64), Field::new(Kind::U64).desc()]);
/// let older = schema.encode(&[Value::U64(7), Value::U64(100)]).unwrap();
/// let newer = schema.encode(&[Value::U64(7), Value::U64(200)]).unwrap();
/// assert!(newer < older);
/// assert_eq!(schema.decode(&newer).unwrap(), vec![Value::U64(7), Value::U64(200)]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySchema {
    /// The fields, most significant first.
    pub fields: Vec<Field>,
}

impl KeySchema {
    /// A schema of these fields.
    pub fn new(fields: Vec<Field>) -> Self {
        KeySchema { fields }
    }

    /// Encodes a full tuple (one value per field).
    pub fn encode(&self, values: &[Value]) -> Result<Vec<u8>> {
        if values.len() != self.fields.len() {
            return Err(Error::bad_argument(format!(
                "key schema has {} fields, got {} values",
                self.fields.len(),
                values.len()
            )));
        }
        self.encode_prefix(values)
    }

    /// Encodes the first `values.len()` fields: the key prefix every key starting with these
    /// values has (for prefix scans).
    pub fn encode_prefix(&self, values: &[Value]) -> Result<Vec<u8>> {
        if values.len() > self.fields.len() {
            return Err(Error::bad_argument(format!(
                "key schema has {} fields, got {} values",
                self.fields.len(),
                values.len()
            )));
        }
        let mut out = Vec::new();
        for (f, v) in self.fields.iter().zip(values) {
            encode_value(&mut out, f, v)?;
        }
        Ok(out)
    }

    /// Decodes a full key; trailing bytes are an error.
    pub fn decode(&self, key: &[u8]) -> Result<Vec<Value>> {
        let mut at = 0;
        let mut out = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let (v, used) = decode_value(&key[at..], f)?;
            out.push(v);
            at += used;
        }
        if at != key.len() {
            return Err(Error::bad_argument(format!(
                "{} bytes left after the last key component",
                key.len() - at
            )));
        }
        Ok(out)
    }

    /// The byte range component `index` occupies in `key`, when the key holds that
    /// component completely (a prefix may stop before it).
    pub fn component_span(&self, key: &[u8], index: usize) -> Option<std::ops::Range<usize>> {
        let mut at = 0;
        for (i, f) in self.fields.iter().enumerate().take(index + 1) {
            let (_, used) = decode_value(key.get(at..)?, f).ok()?;
            if i == index {
                return Some(at..at + used);
            }
            at += used;
        }
        None
    }
}

/// Appends one value in `field`'s encoding.
pub fn encode_value(out: &mut Vec<u8>, field: &Field, v: &Value) -> Result<()> {
    if field.nullable {
        if *v == Value::Null {
            out.push(0x00);
            return Ok(());
        }
        out.push(0x01);
    } else if *v == Value::Null {
        return Err(Error::bad_argument(
            "null value in a non-nullable key field",
        ));
    }
    let start = out.len();
    match (field.kind, v) {
        (Kind::U8, Value::U8(x)) => out.push(*x),
        (Kind::U16, Value::U16(x)) => out.extend_from_slice(&x.to_be_bytes()),
        (Kind::U32, Value::U32(x)) => out.extend_from_slice(&x.to_be_bytes()),
        (Kind::U64, Value::U64(x)) => out.extend_from_slice(&x.to_be_bytes()),
        (Kind::I8, Value::I8(x)) => out.push((*x as u8) ^ 0x80),
        (Kind::I16, Value::I16(x)) => {
            out.extend_from_slice(&((*x as u16) ^ (1 << 15)).to_be_bytes())
        }
        (Kind::I32, Value::I32(x)) => {
            out.extend_from_slice(&((*x as u32) ^ (1 << 31)).to_be_bytes())
        }
        (Kind::I64, Value::I64(x)) => {
            out.extend_from_slice(&((*x as u64) ^ (1 << 63)).to_be_bytes())
        }
        (Kind::Fixed(w), Value::Fixed(b)) => {
            if b.len() != w as usize {
                return Err(Error::bad_argument(format!(
                    "fixed key field of {w} bytes got {} bytes",
                    b.len()
                )));
            }
            out.extend_from_slice(b);
        }
        (Kind::Bytes, Value::Bytes(b)) => escape(out, b),
        (Kind::Str, Value::Str(s)) => escape(out, s.as_bytes()),
        (k, v) => {
            return Err(Error::bad_argument(format!(
                "key field of kind {k:?} got value {v:?}"
            )))
        }
    }
    if field.order == Order::Desc {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
    Ok(())
}

/// [`encode_value`] of a [`Kind::Bytes`] field's value given as a slice (`None` for null),
/// without building a [`Value`]: what a secondary index's key is made of, once per indexed
/// column of every write.
pub fn encode_bytes_value(out: &mut Vec<u8>, field: &Field, v: Option<&[u8]>) -> Result<()> {
    if field.kind != Kind::Bytes {
        return Err(Error::bad_argument(format!(
            "key field of kind {:?} got bytes",
            field.kind
        )));
    }
    let Some(bytes) = v else {
        if field.nullable {
            out.push(0x00);
            return Ok(());
        }
        return Err(Error::bad_argument(
            "null value in a non-nullable key field",
        ));
    };
    if field.nullable {
        out.push(0x01);
    }
    let start = out.len();
    escape(out, bytes);
    if field.order == Order::Desc {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
    Ok(())
}

fn escape(out: &mut Vec<u8>, b: &[u8]) {
    for &x in b {
        out.push(x);
        if x == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Decodes one value of `field` from the start of `key`; returns it and the bytes used.
pub fn decode_value(key: &[u8], field: &Field) -> Result<(Value, usize)> {
    let short = || Error::bad_argument("key ends inside a component");
    let mut at = 0;
    if field.nullable {
        match key.first() {
            Some(0x00) => return Ok((Value::Null, 1)),
            Some(0x01) => at = 1,
            Some(b) => {
                return Err(Error::bad_argument(format!(
                    "bad null marker 0x{b:02x} in key"
                )))
            }
            None => return Err(short()),
        }
    }
    let inv = if field.order == Order::Desc {
        0xFF
    } else {
        0x00
    };
    let take = |n: usize| -> Result<Vec<u8>> {
        let s = key.get(at..at + n).ok_or_else(short)?;
        Ok(s.iter().map(|b| b ^ inv).collect())
    };
    let be = |b: &[u8]| b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x));
    let (v, used) = match field.kind {
        Kind::U8 => (Value::U8(be(&take(1)?) as u8), 1),
        Kind::U16 => (Value::U16(be(&take(2)?) as u16), 2),
        Kind::U32 => (Value::U32(be(&take(4)?) as u32), 4),
        Kind::U64 => (Value::U64(be(&take(8)?)), 8),
        Kind::I8 => (Value::I8((be(&take(1)?) as u8 ^ 0x80) as i8), 1),
        Kind::I16 => (Value::I16((be(&take(2)?) as u16 ^ (1 << 15)) as i16), 2),
        Kind::I32 => (Value::I32((be(&take(4)?) as u32 ^ (1 << 31)) as i32), 4),
        Kind::I64 => (Value::I64((be(&take(8)?) ^ (1 << 63)) as i64), 8),
        Kind::Fixed(w) => (Value::Fixed(take(w as usize)?), w as usize),
        Kind::Bytes | Kind::Str => {
            let (b, used) = unescape(key.get(at..).ok_or_else(short)?, inv)?;
            let v = if field.kind == Kind::Str {
                Value::Str(
                    String::from_utf8(b)
                        .map_err(|_| Error::bad_argument("string key component is not UTF-8"))?,
                )
            } else {
                Value::Bytes(b)
            };
            (v, used)
        }
    };
    Ok((v, at + used))
}

fn unescape(key: &[u8], inv: u8) -> Result<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < key.len() {
        let x = key[i] ^ inv;
        if x != 0 {
            out.push(x);
            i += 1;
            continue;
        }
        match key.get(i + 1).map(|b| b ^ inv) {
            Some(0xFF) => {
                out.push(0);
                i += 2;
            }
            Some(0x01) => return Ok((out, i + 2)),
            Some(b) => {
                return Err(Error::bad_argument(format!(
                    "bad escape 0x00 0x{b:02x} in key component"
                )))
            }
            None => break,
        }
    }
    Err(Error::bad_argument("unterminated key component"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    /// The model: tuple order, component by component, null first, descending reversed.
    fn model_cmp(fields: &[Field], a: &[Value], b: &[Value]) -> Ordering {
        for ((f, x), y) in fields.iter().zip(a).zip(b) {
            let o = match (x, y) {
                (Value::Null, Value::Null) => Ordering::Equal,
                (Value::Null, _) => Ordering::Less,
                (_, Value::Null) => Ordering::Greater,
                _ => {
                    let o = value_cmp(x, y);
                    if f.order == Order::Desc {
                        o.reverse()
                    } else {
                        o
                    }
                }
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    fn value_cmp(x: &Value, y: &Value) -> Ordering {
        match (x, y) {
            (Value::U8(a), Value::U8(b)) => a.cmp(b),
            (Value::U16(a), Value::U16(b)) => a.cmp(b),
            (Value::U32(a), Value::U32(b)) => a.cmp(b),
            (Value::U64(a), Value::U64(b)) => a.cmp(b),
            (Value::I8(a), Value::I8(b)) => a.cmp(b),
            (Value::I16(a), Value::I16(b)) => a.cmp(b),
            (Value::I32(a), Value::I32(b)) => a.cmp(b),
            (Value::I64(a), Value::I64(b)) => a.cmp(b),
            (Value::Fixed(a), Value::Fixed(b)) => a.cmp(b),
            (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
            (Value::Str(a), Value::Str(b)) => a.cmp(b),
            _ => panic!("mismatched kinds"),
        }
    }

    fn kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::U8),
            Just(Kind::U16),
            Just(Kind::U32),
            Just(Kind::U64),
            Just(Kind::I8),
            Just(Kind::I16),
            Just(Kind::I32),
            Just(Kind::I64),
            (0u32..4).prop_map(Kind::Fixed),
            Just(Kind::Bytes),
            Just(Kind::Str),
        ]
    }

    fn field() -> impl Strategy<Value = Field> {
        (kind(), any::<bool>(), any::<bool>()).prop_map(|(kind, desc, nullable)| Field {
            kind,
            order: if desc { Order::Desc } else { Order::Asc },
            nullable,
        })
    }

    /// Small domains, so that equal components (and hence later components) are common.
    fn value(f: Field) -> BoxedStrategy<Value> {
        let v: BoxedStrategy<Value> = match f.kind {
            Kind::U8 => prop_oneof![Just(0u8), Just(255), any::<u8>()]
                .prop_map(Value::U8)
                .boxed(),
            Kind::U16 => (0u16..3).prop_map(Value::U16).boxed(),
            Kind::U32 => prop_oneof![Just(u32::MAX), 0u32..3]
                .prop_map(Value::U32)
                .boxed(),
            Kind::U64 => prop_oneof![Just(u64::MAX), 0u64..3, any::<u64>()]
                .prop_map(Value::U64)
                .boxed(),
            Kind::I8 => prop_oneof![Just(i8::MIN), -2i8..2, any::<i8>()]
                .prop_map(Value::I8)
                .boxed(),
            Kind::I16 => (-2i16..2).prop_map(Value::I16).boxed(),
            Kind::I32 => prop_oneof![Just(i32::MIN), Just(i32::MAX), -2i32..2]
                .prop_map(Value::I32)
                .boxed(),
            Kind::I64 => prop_oneof![Just(i64::MIN), Just(i64::MAX), -2i64..2, any::<i64>()]
                .prop_map(Value::I64)
                .boxed(),
            Kind::Fixed(w) => {
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(255)], w as usize)
                    .prop_map(Value::Fixed)
                    .boxed()
            }
            Kind::Bytes => proptest::collection::vec(
                prop_oneof![Just(0u8), Just(1), Just(0xFF), Just(b'a')],
                0..4,
            )
            .prop_map(Value::Bytes)
            .boxed(),
            Kind::Str => "[a\\x00\\x01ÿé]{0,3}".prop_map(Value::Str).boxed(),
        };
        if f.nullable {
            prop_oneof![1 => Just(Value::Null), 4 => v].boxed()
        } else {
            v
        }
    }

    fn schema_and_tuples() -> impl Strategy<Value = (Vec<Field>, Vec<Vec<Value>>)> {
        proptest::collection::vec(field(), 1..4).prop_flat_map(|fields| {
            let tuple: Vec<BoxedStrategy<Value>> = fields.iter().map(|f| value(*f)).collect();
            (Just(fields), proptest::collection::vec(tuple, 2..8))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn byte_order_is_tuple_order_and_decode_round_trips((fields, tuples) in schema_and_tuples()) {
            let schema = KeySchema::new(fields.clone());
            let keys: Vec<Vec<u8>> = tuples.iter().map(|t| schema.encode(t).unwrap()).collect();
            for (t, k) in tuples.iter().zip(&keys) {
                prop_assert_eq!(&schema.decode(k).unwrap(), t);
            }
            for (i, a) in tuples.iter().enumerate() {
                for (j, b) in tuples.iter().enumerate() {
                    prop_assert_eq!(keys[i].cmp(&keys[j]), model_cmp(&fields, a, b),
                        "tuples {:?} and {:?}", a, b);
                }
            }
        }

        #[test]
        fn prefixes_of_an_encoding_are_prefixes_of_the_key((fields, tuples) in schema_and_tuples(), n in 0usize..4) {
            let schema = KeySchema::new(fields);
            let t = &tuples[0];
            let n = n.min(t.len());
            let full = schema.encode(t).unwrap();
            let prefix = schema.encode_prefix(&t[..n]).unwrap();
            prop_assert!(full.starts_with(&prefix));
            if n > 0 {
                let span = schema.component_span(&full, n - 1).unwrap();
                prop_assert_eq!(span.end, prefix.len());
            }
        }

        #[test]
        fn bytes_encode_as_their_value(nullable in any::<bool>(), desc in any::<bool>(),
                                       v in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12)),
                                       prefix in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut f = Field::new(Kind::Bytes);
            if nullable { f = f.nullable(); }
            if desc { f = f.desc(); }
            let value = v.clone().map_or(Value::Null, Value::Bytes);
            let (mut a, mut b) = (prefix.clone(), prefix);
            let ra = encode_value(&mut a, &f, &value);
            let rb = encode_bytes_value(&mut b, &f, v.as_deref());
            prop_assert_eq!(ra.is_ok(), rb.is_ok());
            prop_assert_eq!(a, b);
        }

        #[test]
        fn decoding_garbage_never_panics(fields in proptest::collection::vec(field(), 1..4),
                                         bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            let schema = KeySchema::new(fields);
            if let Ok(values) = schema.decode(&bytes) {
                // Whatever decodes re-encodes to the same bytes (the encoding is canonical).
                prop_assert_eq!(schema.encode(&values).unwrap(), bytes);
            }
        }
    }

    #[test]
    fn bad_values_are_typed_errors() {
        let s = KeySchema::new(vec![Field::new(Kind::Fixed(2))]);
        assert!(s.encode(&[Value::Fixed(vec![1])]).is_err());
        assert!(s.encode(&[Value::U8(1)]).is_err());
        assert!(s.encode(&[Value::Null]).is_err());
        assert!(s.encode(&[]).is_err());
        assert!(s.decode(&[1]).is_err());
        assert!(s.decode(&[1, 2, 3]).is_err());
        let s = KeySchema::new(vec![Field::new(Kind::Str)]);
        assert!(s.decode(&[0xC3, 0x00, 0x01]).is_err());
        assert!(s.decode(b"ab").is_err());
    }
}
