//! A watch over a connection's input protocol while the generated processor reads one
//! request: it hands the processor the message header the connection already read, records
//! the first decoding error (the generated code answers such an error with an application
//! exception and goes on, which would leave the stream mid-message: the connection closes
//! instead), tells whether the request's argument struct was read to its end (a request
//! for an unknown method is answered without reading its arguments: they are then skipped,
//! so the next request starts where it should), and holds what the request makes the
//! server allocate against the bytes it sent ([`Budget`]).
//!
//! Invariants: every call within the budget is forwarded unchanged; a request whose decoding
//! takes more than [`ALLOC_FACTOR`] times the bytes read so far plus [`ALLOC_SLACK`] fails at
//! the first struct or string past it, and one whose container announces more elements than
//! the rest of its message can hold fails before the generated code reserves room for them
//! (a reservation within that is address space until elements fill it, each charged); its
//! connection closes. Skipped strings are discarded, not allocated.

use std::sync::atomic::{AtomicUsize, Ordering};
use thrift::protocol::{
    TFieldIdentifier, TInputProtocol, TListIdentifier, TMapIdentifier, TMessageIdentifier,
    TSetIdentifier, TStructIdentifier, TType,
};

/// How many bytes of decoded requests one byte on the wire may cost. Binary-protocol
/// requests cost at most about 4; compact ones with tiny fields up to about 13 (a `getRows`
/// of one-byte row keys, a batch of deletes of a short column); a message of empty structs
/// costs 96.
pub(crate) const ALLOC_FACTOR: usize = 16;
/// What any request may allocate beyond [`ALLOC_FACTOR`] times its size, in bytes.
pub(crate) const ALLOC_SLACK: usize = 256 * 1024;
/// What one decoded struct is charged: the size of the generated `TIncrement`, the largest
/// struct a request carries in numbers, rounded up (byte strings are charged apart).
const STRUCT_COST: usize = 96;
/// What one byte string costs besides its bytes when it is a container's element (a struct's
/// strings live inside the struct's own size).
const ELEMENT_COST: usize = 24;

/// What one request has made the server allocate, against the bytes it has sent.
pub(crate) struct Budget<'a> {
    /// The bytes of the message read so far.
    used: &'a AtomicUsize,
    /// The most bytes the message can have (its frame, or the message limit).
    window: &'a AtomicUsize,
    charged: usize,
    /// For each open struct (false) and container (true), innermost last.
    open: Vec<bool>,
}

impl<'a> Budget<'a> {
    /// The budget of the message whose bytes `used` counts, at most `window` long.
    pub(crate) fn new(used: &'a AtomicUsize, window: &'a AtomicUsize) -> Self {
        Budget {
            used,
            window,
            charged: 0,
            open: Vec::new(),
        }
    }

    fn charge(&mut self, bytes: usize) -> thrift::Result<()> {
        self.charged = self.charged.saturating_add(bytes);
        let read = self.used.load(Ordering::Relaxed);
        let allowed = read
            .saturating_mul(ALLOC_FACTOR)
            .saturating_add(ALLOC_SLACK);
        if self.charged > allowed {
            return Err(size_limit(format!(
                "the request would take {} bytes of memory for the {read} bytes it sent",
                self.charged
            )));
        }
        Ok(())
    }

    /// A container of `count` elements, each at least `min_size` bytes on the wire, must
    /// fit in what is left of the message.
    fn fits(&self, count: i32, min_size: usize) -> thrift::Result<()> {
        let count = usize::try_from(count).unwrap_or(0);
        let left = self
            .window
            .load(Ordering::Relaxed)
            .saturating_sub(self.used.load(Ordering::Relaxed));
        if count.saturating_mul(min_size.max(1)) > left {
            return Err(size_limit(format!(
                "a container of {count} elements announced with {left} bytes of the message left"
            )));
        }
        Ok(())
    }

    fn in_container(&self) -> bool {
        self.open.last().copied().unwrap_or(false)
    }
}

fn size_limit(message: String) -> thrift::Error {
    thrift::Error::Protocol(thrift::ProtocolError::new(
        thrift::ProtocolErrorKind::SizeLimit,
        message,
    ))
}

/// The watch over one request.
pub(crate) struct Watched<'a> {
    inner: &'a mut dyn TInputProtocol,
    budget: Budget<'a>,
    header: Option<TMessageIdentifier>,
    depth: usize,
    /// Whether the top-level (argument) struct was read to its end.
    pub(crate) args_read: bool,
    /// Set too once the arguments are read (the connection's first request was received).
    received: &'a std::sync::atomic::AtomicBool,
    /// The first decoding error, if any.
    pub(crate) failed: Option<String>,
}

impl<'a> Watched<'a> {
    /// Watches `inner` for the request whose header is `header`, within `budget`.
    pub(crate) fn new(
        inner: &'a mut dyn TInputProtocol,
        header: TMessageIdentifier,
        budget: Budget<'a>,
        received: &'a std::sync::atomic::AtomicBool,
    ) -> Self {
        Watched {
            inner,
            budget,
            received,
            header: Some(header),
            depth: 0,
            args_read: false,
            failed: None,
        }
    }

    /// A string or byte array of `len` bytes was read.
    fn charge_bytes(&mut self, len: usize) -> thrift::Result<()> {
        let extra = if self.budget.in_container() {
            ELEMENT_COST
        } else {
            0
        };
        self.budget.charge(len.saturating_add(extra))
    }

    /// A container of `count` elements of `kinds` (one type per element part) opened.
    fn open_container(&mut self, count: i32, kinds: &[TType]) -> thrift::Result<()> {
        let min: usize = kinds
            .iter()
            .map(|t| self.inner.min_serialized_size(*t))
            .sum();
        self.budget.fits(count, min)?;
        self.budget.open.push(true);
        Ok(())
    }

    fn note<T>(&mut self, r: thrift::Result<T>) -> thrift::Result<T> {
        if let Err(e) = &r {
            if self.failed.is_none() {
                self.failed = Some(describe(e));
            }
        }
        r
    }
}

/// An error with its message: the `thrift` crate's own display gives only the kind
/// ("message too long").
fn describe(e: &thrift::Error) -> String {
    match e {
        thrift::Error::Protocol(p) if !p.message.is_empty() => format!("{p}: {}", p.message),
        thrift::Error::Transport(t) if !t.message.is_empty() => format!("{t}: {}", t.message),
        other => other.to_string(),
    }
}

impl TInputProtocol for Watched<'_> {
    fn read_message_begin(&mut self) -> thrift::Result<TMessageIdentifier> {
        match self.header.take() {
            Some(h) => Ok(h),
            None => {
                let r = self.inner.read_message_begin();
                self.note(r)
            }
        }
    }
    fn read_message_end(&mut self) -> thrift::Result<()> {
        let r = self.inner.read_message_end();
        self.note(r)
    }
    fn read_struct_begin(&mut self) -> thrift::Result<Option<TStructIdentifier>> {
        self.depth += 1;
        let r = self
            .budget
            .charge(STRUCT_COST)
            .and_then(|()| self.inner.read_struct_begin());
        self.budget.open.push(false);
        self.note(r)
    }
    fn read_struct_end(&mut self) -> thrift::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        self.budget.open.pop();
        let r = self.inner.read_struct_end();
        if self.depth == 0 && r.is_ok() {
            self.args_read = true;
            self.received.store(true, Ordering::SeqCst);
        }
        self.note(r)
    }
    fn read_field_begin(&mut self) -> thrift::Result<TFieldIdentifier> {
        let r = self.inner.read_field_begin();
        self.note(r)
    }
    fn read_field_end(&mut self) -> thrift::Result<()> {
        let r = self.inner.read_field_end();
        self.note(r)
    }
    fn read_bool(&mut self) -> thrift::Result<bool> {
        let r = self.inner.read_bool();
        self.note(r)
    }
    fn read_bytes(&mut self) -> thrift::Result<Vec<u8>> {
        let r = self.inner.read_bytes();
        let r = r.and_then(|b| self.charge_bytes(b.len()).map(|()| b));
        self.note(r)
    }
    fn read_i8(&mut self) -> thrift::Result<i8> {
        let r = self.inner.read_i8();
        self.note(r)
    }
    fn read_i16(&mut self) -> thrift::Result<i16> {
        let r = self.inner.read_i16();
        self.note(r)
    }
    fn read_i32(&mut self) -> thrift::Result<i32> {
        let r = self.inner.read_i32();
        self.note(r)
    }
    fn read_i64(&mut self) -> thrift::Result<i64> {
        let r = self.inner.read_i64();
        self.note(r)
    }
    fn read_double(&mut self) -> thrift::Result<f64> {
        let r = self.inner.read_double();
        self.note(r)
    }
    fn read_uuid(&mut self) -> thrift::Result<uuid::Uuid> {
        let r = self.inner.read_uuid();
        self.note(r)
    }
    fn read_string(&mut self) -> thrift::Result<String> {
        let r = self.inner.read_string();
        let r = r.and_then(|s| self.charge_bytes(s.len()).map(|()| s));
        self.note(r)
    }
    fn read_list_begin(&mut self) -> thrift::Result<TListIdentifier> {
        let r = self.inner.read_list_begin();
        let r = r.and_then(|l| self.open_container(l.size, &[l.element_type]).map(|()| l));
        self.note(r)
    }
    fn read_list_end(&mut self) -> thrift::Result<()> {
        self.budget.open.pop();
        let r = self.inner.read_list_end();
        self.note(r)
    }
    fn read_set_begin(&mut self) -> thrift::Result<TSetIdentifier> {
        let r = self.inner.read_set_begin();
        let r = r.and_then(|l| self.open_container(l.size, &[l.element_type]).map(|()| l));
        self.note(r)
    }
    fn read_set_end(&mut self) -> thrift::Result<()> {
        self.budget.open.pop();
        let r = self.inner.read_set_end();
        self.note(r)
    }
    fn read_map_begin(&mut self) -> thrift::Result<TMapIdentifier> {
        let r = self.inner.read_map_begin();
        let r = r.and_then(|m| {
            let kinds: Vec<TType> = [m.key_type, m.value_type].into_iter().flatten().collect();
            self.open_container(m.size, &kinds).map(|()| m)
        });
        self.note(r)
    }
    fn read_map_end(&mut self) -> thrift::Result<()> {
        self.budget.open.pop();
        let r = self.inner.read_map_end();
        self.note(r)
    }
    fn read_byte(&mut self) -> thrift::Result<u8> {
        let r = self.inner.read_byte();
        self.note(r)
    }
    fn skip_binary(&mut self) -> thrift::Result<()> {
        let r = self.inner.skip_binary();
        self.note(r)
    }
    fn min_serialized_size(&self, field_type: thrift::protocol::TType) -> usize {
        self.inner.min_serialized_size(field_type)
    }
}
