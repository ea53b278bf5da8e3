//! What the connection's current request called: its method, when it started, the table it
//! named and whether it answered with an error. The handler notes these as it runs (on the
//! connection's own thread), and the connection takes them once the reply is written, for the
//! request's log line and its metrics.
//!
//! Invariant: each request starts from a clean note ([`called`] resets it), so a request
//! never inherits the previous one's table or failure.

use std::cell::RefCell;
use std::time::Instant;

/// One request's note.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// The service method (`mutateRows`, `scannerGetList`, ...).
    pub(crate) method: &'static str,
    /// When the handler began it.
    pub(crate) started: Instant,
    /// The table it named (a scanner call: the table its scanner reads), as HBase prints it.
    pub(crate) table: Option<String>,
    /// True when it answered with an exception.
    pub(crate) failed: bool,
}

thread_local! {
    static CALL: RefCell<Option<Call>> = const { RefCell::new(None) };
}

/// Starts the note of a request to `method`.
pub(crate) fn called(method: &'static str) {
    CALL.with(|c| {
        *c.borrow_mut() = Some(Call {
            method,
            started: Instant::now(),
            table: None,
            failed: false,
        })
    });
}

/// Notes the table the current request names (the first one it names wins).
pub(crate) fn note_table(table: &str) {
    CALL.with(|c| {
        if let Some(call) = c.borrow_mut().as_mut() {
            if call.table.is_none() {
                call.table = Some(table.to_string());
            }
        }
    });
}

/// Notes that the current request answers with an exception.
pub(crate) fn note_failure() {
    CALL.with(|c| {
        if let Some(call) = c.borrow_mut().as_mut() {
            call.failed = true;
        }
    });
}

/// The note of the last request on this thread, resetting it (`None`: the request named no
/// method the service has).
pub(crate) fn take() -> Option<Call> {
    CALL.with(|c| c.borrow_mut().take())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_starts_clean() {
        called("get");
        note_table("t1");
        note_table("t2");
        note_failure();
        let first = take().unwrap();
        assert_eq!(
            (first.method, first.table.as_deref(), first.failed),
            ("get", Some("t1"), true)
        );
        assert!(take().is_none(), "taken once");
        note_table("ignored without a call");
        called("scannerGet");
        let second = take().unwrap();
        assert_eq!((second.table, second.failed), (None, false));
    }
}
