//! A watch over a connection's input protocol while the generated processor reads one
//! request: it hands the processor the message header the connection already read, records
//! the first decoding error (the generated code answers such an error with an application
//! exception and goes on, which would leave the stream mid-message: the connection closes
//! instead), and tells whether the request's argument struct was read to its end (a request
//! for an unknown method is answered without reading its arguments: they are then skipped,
//! so the next request starts where it should).
//!
//! Invariant: every call is forwarded unchanged; the watch only observes.

use thrift::protocol::{
    TFieldIdentifier, TInputProtocol, TListIdentifier, TMapIdentifier, TMessageIdentifier,
    TSetIdentifier, TStructIdentifier,
};

/// The watch over one request.
pub(crate) struct Watched<'a> {
    inner: &'a mut dyn TInputProtocol,
    header: Option<TMessageIdentifier>,
    depth: usize,
    /// Whether the top-level (argument) struct was read to its end.
    pub(crate) args_read: bool,
    /// The first decoding error, if any.
    pub(crate) failed: Option<String>,
}

impl<'a> Watched<'a> {
    /// Watches `inner` for the request whose header is `header`.
    pub(crate) fn new(inner: &'a mut dyn TInputProtocol, header: TMessageIdentifier) -> Self {
        Watched {
            inner,
            header: Some(header),
            depth: 0,
            args_read: false,
            failed: None,
        }
    }

    fn note<T>(&mut self, r: thrift::Result<T>) -> thrift::Result<T> {
        if let Err(e) = &r {
            if self.failed.is_none() {
                self.failed = Some(e.to_string());
            }
        }
        r
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
        let r = self.inner.read_struct_begin();
        self.note(r)
    }
    fn read_struct_end(&mut self) -> thrift::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        let r = self.inner.read_struct_end();
        if self.depth == 0 && r.is_ok() {
            self.args_read = true;
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
        self.note(r)
    }
    fn read_list_begin(&mut self) -> thrift::Result<TListIdentifier> {
        let r = self.inner.read_list_begin();
        self.note(r)
    }
    fn read_list_end(&mut self) -> thrift::Result<()> {
        let r = self.inner.read_list_end();
        self.note(r)
    }
    fn read_set_begin(&mut self) -> thrift::Result<TSetIdentifier> {
        let r = self.inner.read_set_begin();
        self.note(r)
    }
    fn read_set_end(&mut self) -> thrift::Result<()> {
        let r = self.inner.read_set_end();
        self.note(r)
    }
    fn read_map_begin(&mut self) -> thrift::Result<TMapIdentifier> {
        let r = self.inner.read_map_begin();
        self.note(r)
    }
    fn read_map_end(&mut self) -> thrift::Result<()> {
        let r = self.inner.read_map_end();
        self.note(r)
    }
    fn read_byte(&mut self) -> thrift::Result<u8> {
        let r = self.inner.read_byte();
        self.note(r)
    }
    fn min_serialized_size(&self, field_type: thrift::protocol::TType) -> usize {
        self.inner.min_serialized_size(field_type)
    }
}
