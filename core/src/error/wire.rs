//! [`ErrorWire`]: an [`Error`] as a value a network protocol can carry (serde), and back.
//!
//! `Error` holds what does not serialize as it is (an `std::io::Error`, paths, a
//! `&'static str`, a boxed error), so it travels as this mirror: one variant per variant of
//! `Error`, with the same fields in plain values. Both conversions match every variant with
//! no wildcard, so a new `Error` variant does not compile until it has a mirror here - added
//! at the end of `ErrorWire` whatever its place in `Error`, since postcard names a variant
//! by its index (the variants only ever grow at the end).
//!
//! A round trip (`Error` -> `ErrorWire` -> `Error`) keeps the variant, its `Display` text
//! and every field, except:
//!
//! - an `std::io::Error` travels as its kind, a stable code of [`IO_KINDS`], and its
//!   message (its `Display`): it comes back as `io::Error::new(kind, message)`, with the same
//!   kind and text but no OS error code or source. A kind without a code here (one a newer
//!   `std` adds, or a newer peer sends) comes back as `ErrorKind::Other`;
//! - paths travel as text, so a path that is not UTF-8 comes back as `Display` shows it;
//! - [`Error::TableState`]'s `expected` comes back as the same static string when it is one
//!   the engine uses ([`EXPECTED_STATES`]), else as `"another state"`;
//! - sizes and positions (`usize`) travel as `u64`, and come back saturated to `usize::MAX`
//!   on a target where they do not fit;
//! - [`Error::InvalidAddedMutation`] nests at most [`MAX_ERROR_DEPTH`] levels (the engine
//!   nests one): one at the deepest level travels as an [`Error::BadArgument`] holding its
//!   text (its reasons cut), so what is encoded can always be decoded.
//!
//! Decoding untrusted bytes is bounded: the nesting of reasons is counted while they decode
//! and refused past [`MAX_ERROR_DEPTH`], so hostile bytes cannot exhaust the stack (the
//! count is per thread, as the filter codec's: a decode runs on one thread, and a guard
//! closes each level on every way out).

use super::Error;
use serde::de::{Deserialize, Deserializer};
use serde::Serialize;
use std::cell::Cell;
use std::io::ErrorKind;

/// The deepest nesting of [`Error::InvalidAddedMutation`] reasons an [`ErrorWire`] carries,
/// the outermost error counting as level 1.
pub(crate) const MAX_ERROR_DEPTH: usize = 8;

/// The strings the engine gives [`Error::TableState`]'s `expected`, which a decoded error
/// maps back to themselves.
const EXPECTED_STATES: [&str; 2] = ["enabled", "disabled"];

/// What a decoded [`Error::TableState`] expects when the sender's string is not one of
/// [`EXPECTED_STATES`].
const OTHER_STATE: &str = "another state";

/// The stable code of each `std::io::ErrorKind` on the wire. Codes are never reused or
/// changed; a new kind gets the next free code. A kind not listed travels as `Other` (0).
const IO_KINDS: [(u8, ErrorKind); 38] = [
    (0, ErrorKind::Other),
    (1, ErrorKind::NotFound),
    (2, ErrorKind::PermissionDenied),
    (3, ErrorKind::ConnectionRefused),
    (4, ErrorKind::ConnectionReset),
    (5, ErrorKind::HostUnreachable),
    (6, ErrorKind::NetworkUnreachable),
    (7, ErrorKind::ConnectionAborted),
    (8, ErrorKind::NotConnected),
    (9, ErrorKind::AddrInUse),
    (10, ErrorKind::AddrNotAvailable),
    (11, ErrorKind::NetworkDown),
    (12, ErrorKind::BrokenPipe),
    (13, ErrorKind::AlreadyExists),
    (14, ErrorKind::WouldBlock),
    (15, ErrorKind::NotADirectory),
    (16, ErrorKind::IsADirectory),
    (17, ErrorKind::DirectoryNotEmpty),
    (18, ErrorKind::ReadOnlyFilesystem),
    (19, ErrorKind::StaleNetworkFileHandle),
    (20, ErrorKind::InvalidInput),
    (21, ErrorKind::InvalidData),
    (22, ErrorKind::TimedOut),
    (23, ErrorKind::WriteZero),
    (24, ErrorKind::StorageFull),
    (25, ErrorKind::NotSeekable),
    (26, ErrorKind::QuotaExceeded),
    (27, ErrorKind::FileTooLarge),
    (28, ErrorKind::ResourceBusy),
    (29, ErrorKind::ExecutableFileBusy),
    (30, ErrorKind::Deadlock),
    (31, ErrorKind::CrossesDevices),
    (32, ErrorKind::TooManyLinks),
    (33, ErrorKind::InvalidFilename),
    (34, ErrorKind::ArgumentListTooLong),
    (35, ErrorKind::Interrupted),
    (36, ErrorKind::Unsupported),
    (37, ErrorKind::UnexpectedEof),
];

/// The wire code of an I/O error kind (`Other`'s, 0, for a kind [`IO_KINDS`] lacks).
fn io_kind_code(kind: ErrorKind) -> u8 {
    IO_KINDS
        .iter()
        .find(|(_, k)| *k == kind)
        .map_or(0, |(code, _)| *code)
}

/// The I/O error kind of a wire code (`Other` for an unknown code).
fn io_kind(code: u8) -> ErrorKind {
    IO_KINDS
        .iter()
        .find(|(c, _)| *c == code)
        .map_or(ErrorKind::Other, |(_, kind)| *kind)
}

/// An [`Error`] as a serializable value: one variant per variant of `Error`, each named and
/// shaped as its original (see the module doc for what a round trip keeps). Convert with
/// `ErrorWire::from(&error)` and `Error::from(wire)`.
///
/// ```
/// use basalt_core::{Error, ErrorWire};
/// let e = Error::TableNotFound("default:users".into());
/// let back = Error::from(ErrorWire::from(&e));
/// assert_eq!(back.to_string(), e.to_string());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum ErrorWire {
    /// [`Error::TableNotFound`].
    TableNotFound(String),
    /// [`Error::TableExists`].
    TableExists(String),
    /// [`Error::SnapshotNotFound`].
    SnapshotNotFound(String),
    /// [`Error::SnapshotExists`].
    SnapshotExists(String),
    /// [`Error::TableDisabled`].
    TableDisabled(String),
    /// [`Error::TableState`].
    TableState {
        /// The table.
        table: String,
        /// What state the operation expected.
        expected: String,
    },
    /// [`Error::RegionNotFound`].
    RegionNotFound {
        /// The table.
        table: String,
        /// The region id asked for.
        id: u64,
    },
    /// [`Error::RegionOffline`].
    RegionOffline {
        /// The table.
        table: String,
        /// The region's id.
        region: u64,
        /// The store file at fault.
        file: String,
        /// What is wrong with it.
        reason: String,
    },
    /// [`Error::RegionNotServed`].
    RegionNotServed {
        /// The table.
        table: String,
        /// The region's id.
        region: u64,
    },
    /// [`Error::NamespaceNotFound`].
    NamespaceNotFound(String),
    /// [`Error::NamespaceExists`].
    NamespaceExists(String),
    /// [`Error::FamilyNotFound`].
    FamilyNotFound {
        /// The table.
        table: String,
        /// The family.
        family: String,
    },
    /// [`Error::InvalidRow`].
    InvalidRow(String),
    /// [`Error::ValueTooLarge`].
    ValueTooLarge {
        /// The value's size.
        size: u64,
        /// The configured limit.
        limit: u64,
    },
    /// [`Error::BadArgument`].
    BadArgument(String),
    /// [`Error::NotACounter`].
    NotACounter {
        /// The column, as `family:qualifier`.
        column: String,
        /// The cell's length.
        len: u64,
    },
    /// [`Error::Io`].
    Io {
        /// The error's `std::io::ErrorKind`, as its wire code (unknown codes read as
        /// `Other`).
        kind: u8,
        /// The error's text.
        message: String,
    },
    /// [`Error::Corruption`].
    Corruption {
        /// The file.
        file: String,
        /// The byte offset of the bad data.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// [`Error::WalCorruption`].
    WalCorruption {
        /// The segment file.
        segment: String,
        /// The byte offset of the damage.
        offset: u64,
        /// What is wrong.
        reason: String,
        /// The tables whose store files hold writes newer than the cut.
        tables: Vec<String>,
    },
    /// [`Error::WritesRefused`].
    WritesRefused(String),
    /// [`Error::Closed`].
    Closed,
    /// [`Error::Fenced`].
    Fenced {
        /// The fenced writer's folder of the object store.
        writer: String,
        /// The segment id the writer could not create.
        segment: u64,
    },
    /// [`Error::LeaseExpired`].
    LeaseExpired {
        /// The lease's id.
        lease: u64,
    },
    /// [`Error::RegionOwned`].
    RegionOwned {
        /// The region (`table/id`).
        region: String,
        /// The owning process's name.
        owner: String,
    },
    /// [`Error::CoordinationConflict`].
    CoordinationConflict(String),
    /// [`Error::Busy`].
    Busy(String),
    /// [`Error::Coprocessor`].
    Coprocessor {
        /// The coprocessor's registered name.
        name: String,
        /// What went wrong.
        msg: String,
    },
    /// [`Error::PluginFault`].
    PluginFault {
        /// The coprocessor's name.
        name: String,
        /// The trap, deadline or memory limit hit.
        msg: String,
    },
    /// [`Error::PluginNotFound`].
    PluginNotFound(String),
    /// [`Error::InvalidAddedMutation`].
    InvalidAddedMutation {
        /// The table the mutation was added to.
        table: String,
        /// Why it is invalid (reasons nest at most 8 levels deep, the outermost error
        /// counting as 1).
        #[serde(deserialize_with = "nested_reason")]
        reason: Box<ErrorWire>,
    },
    /// [`Error::RowLockTimeout`].
    RowLockTimeout {
        /// The table of the row.
        table: String,
        /// The row.
        row: String,
        /// How long the batch waited.
        waited_ms: u64,
    },
    /// [`Error::UniqueViolation`].
    UniqueViolation {
        /// The index table.
        table: String,
        /// The index row.
        row: String,
    },
    /// [`Error::IndexNotReady`].
    IndexNotReady(String),
    /// [`Error::IndexTableWrite`].
    IndexTableWrite(String),
    /// [`Error::IndexNotFound`].
    IndexNotFound(String),
    /// [`Error::ReadOnlyTable`].
    ReadOnlyTable {
        /// The table.
        table: String,
        /// The coprocessors it lists that are not registered.
        missing: Vec<String>,
    },
    /// [`Error::FilterParse`].
    FilterParse {
        /// Byte offset of the offending token in the filter string.
        pos: u64,
        /// What is wrong.
        msg: String,
    },
}

thread_local! {
    /// Reasons open in the decode running on this thread: the reason being decoded is at
    /// level `open + 1` below the outermost error.
    static OPEN_REASONS: Cell<usize> = const { Cell::new(0) };
}

/// One open level of reasons; closes it when dropped.
struct Level;

impl Level {
    /// Opens a level for a reason, or fails when it would be deeper than
    /// [`MAX_ERROR_DEPTH`].
    fn enter<E: serde::de::Error>() -> Result<Level, E> {
        OPEN_REASONS.with(|open| {
            let n = open.get();
            // The reason's level: the outermost error is 1, its reason 2.
            if n + 2 > MAX_ERROR_DEPTH {
                return Err(E::custom(format!(
                    "error reasons nested deeper than {MAX_ERROR_DEPTH} levels"
                )));
            }
            open.set(n + 1);
            Ok(Level)
        })
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        OPEN_REASONS.with(|open| open.set(open.get().saturating_sub(1)));
    }
}

/// Decodes the reason of an `InvalidAddedMutation`, one level deeper.
fn nested_reason<'de, D: Deserializer<'de>>(d: D) -> Result<Box<ErrorWire>, D::Error> {
    let _level = Level::enter::<D::Error>()?;
    ErrorWire::deserialize(d).map(Box::new)
}

/// A size as it travels.
fn size(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A size as it arrives (saturated where `usize` is narrower).
fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl From<&Error> for ErrorWire {
    fn from(e: &Error) -> Self {
        to_wire(e, 1)
    }
}

/// `e`, at level `depth` of the reasons' nesting, as it travels.
fn to_wire(e: &Error, depth: usize) -> ErrorWire {
    use ErrorWire as W;
    if depth >= MAX_ERROR_DEPTH && matches!(e, Error::InvalidAddedMutation { .. }) {
        // Its reason would be deeper than a decoder accepts: the text travels instead.
        return W::BadArgument(e.to_string());
    }
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    match e {
        Error::TableNotFound(t) => W::TableNotFound(t.clone()),
        Error::TableExists(t) => W::TableExists(t.clone()),
        Error::SnapshotNotFound(s) => W::SnapshotNotFound(s.clone()),
        Error::SnapshotExists(s) => W::SnapshotExists(s.clone()),
        Error::TableDisabled(t) => W::TableDisabled(t.clone()),
        Error::TableState { table, expected } => W::TableState {
            table: table.clone(),
            expected: (*expected).to_string(),
        },
        Error::RegionNotFound { table, id } => W::RegionNotFound {
            table: table.clone(),
            id: *id,
        },
        Error::RegionOffline {
            table,
            region,
            file,
            reason,
        } => W::RegionOffline {
            table: table.clone(),
            region: *region,
            file: path(file),
            reason: reason.clone(),
        },
        Error::RegionNotServed { table, region } => W::RegionNotServed {
            table: table.clone(),
            region: *region,
        },
        Error::NamespaceNotFound(n) => W::NamespaceNotFound(n.clone()),
        Error::NamespaceExists(n) => W::NamespaceExists(n.clone()),
        Error::FamilyNotFound { table, family } => W::FamilyNotFound {
            table: table.clone(),
            family: family.clone(),
        },
        Error::InvalidRow(m) => W::InvalidRow(m.clone()),
        Error::ValueTooLarge { size: s, limit } => W::ValueTooLarge {
            size: size(*s),
            limit: size(*limit),
        },
        Error::BadArgument(m) => W::BadArgument(m.clone()),
        Error::NotACounter { column, len } => W::NotACounter {
            column: column.clone(),
            len: size(*len),
        },
        Error::Io(io) => W::Io {
            kind: io_kind_code(io.kind()),
            message: io.to_string(),
        },
        Error::Corruption {
            file,
            offset,
            reason,
        } => W::Corruption {
            file: path(file),
            offset: *offset,
            reason: reason.clone(),
        },
        Error::WalCorruption {
            segment,
            offset,
            reason,
            tables,
        } => W::WalCorruption {
            segment: path(segment),
            offset: *offset,
            reason: reason.clone(),
            tables: tables.clone(),
        },
        Error::WritesRefused(m) => W::WritesRefused(m.clone()),
        Error::Closed => W::Closed,
        Error::Fenced { writer, segment } => W::Fenced {
            writer: writer.clone(),
            segment: *segment,
        },
        Error::LeaseExpired { lease } => W::LeaseExpired { lease: *lease },
        Error::RegionOwned { region, owner } => W::RegionOwned {
            region: region.clone(),
            owner: owner.clone(),
        },
        Error::CoordinationConflict(m) => W::CoordinationConflict(m.clone()),
        Error::Busy(m) => W::Busy(m.clone()),
        Error::Coprocessor { name, msg } => W::Coprocessor {
            name: name.clone(),
            msg: msg.clone(),
        },
        Error::PluginFault { name, msg } => W::PluginFault {
            name: name.clone(),
            msg: msg.clone(),
        },
        Error::PluginNotFound(id) => W::PluginNotFound(id.clone()),
        Error::InvalidAddedMutation { table, reason } => W::InvalidAddedMutation {
            table: table.clone(),
            reason: Box::new(to_wire(reason, depth + 1)),
        },
        Error::RowLockTimeout {
            table,
            row,
            waited_ms,
        } => W::RowLockTimeout {
            table: table.clone(),
            row: row.clone(),
            waited_ms: *waited_ms,
        },
        Error::UniqueViolation { table, row } => W::UniqueViolation {
            table: table.clone(),
            row: row.clone(),
        },
        Error::IndexNotReady(i) => W::IndexNotReady(i.clone()),
        Error::IndexTableWrite(t) => W::IndexTableWrite(t.clone()),
        Error::IndexNotFound(i) => W::IndexNotFound(i.clone()),
        Error::ReadOnlyTable { table, missing } => W::ReadOnlyTable {
            table: table.clone(),
            missing: missing.clone(),
        },
        Error::FilterParse { pos, msg } => W::FilterParse {
            pos: size(*pos),
            msg: msg.clone(),
        },
    }
}

impl From<ErrorWire> for Error {
    fn from(w: ErrorWire) -> Self {
        use ErrorWire as W;
        match w {
            W::TableNotFound(t) => Error::TableNotFound(t),
            W::TableExists(t) => Error::TableExists(t),
            W::SnapshotNotFound(s) => Error::SnapshotNotFound(s),
            W::SnapshotExists(s) => Error::SnapshotExists(s),
            W::TableDisabled(t) => Error::TableDisabled(t),
            W::TableState { table, expected } => Error::TableState {
                table,
                expected: EXPECTED_STATES
                    .into_iter()
                    .find(|s| *s == expected)
                    .unwrap_or(OTHER_STATE),
            },
            W::RegionNotFound { table, id } => Error::RegionNotFound { table, id },
            W::RegionOffline {
                table,
                region,
                file,
                reason,
            } => Error::RegionOffline {
                table,
                region,
                file: file.into(),
                reason,
            },
            W::RegionNotServed { table, region } => Error::RegionNotServed { table, region },
            W::NamespaceNotFound(n) => Error::NamespaceNotFound(n),
            W::NamespaceExists(n) => Error::NamespaceExists(n),
            W::FamilyNotFound { table, family } => Error::FamilyNotFound { table, family },
            W::InvalidRow(m) => Error::InvalidRow(m),
            W::ValueTooLarge { size, limit } => Error::ValueTooLarge {
                size: usize_of(size),
                limit: usize_of(limit),
            },
            W::BadArgument(m) => Error::BadArgument(m),
            W::NotACounter { column, len } => Error::NotACounter {
                column,
                len: usize_of(len),
            },
            W::Io { kind, message } => Error::Io(std::io::Error::new(io_kind(kind), message)),
            W::Corruption {
                file,
                offset,
                reason,
            } => Error::Corruption {
                file: file.into(),
                offset,
                reason,
            },
            W::WalCorruption {
                segment,
                offset,
                reason,
                tables,
            } => Error::WalCorruption {
                segment: segment.into(),
                offset,
                reason,
                tables,
            },
            W::WritesRefused(m) => Error::WritesRefused(m),
            W::Closed => Error::Closed,
            W::Fenced { writer, segment } => Error::Fenced { writer, segment },
            W::LeaseExpired { lease } => Error::LeaseExpired { lease },
            W::RegionOwned { region, owner } => Error::RegionOwned { region, owner },
            W::CoordinationConflict(m) => Error::CoordinationConflict(m),
            W::Busy(m) => Error::Busy(m),
            W::Coprocessor { name, msg } => Error::Coprocessor { name, msg },
            W::PluginFault { name, msg } => Error::PluginFault { name, msg },
            W::PluginNotFound(id) => Error::PluginNotFound(id),
            W::InvalidAddedMutation { table, reason } => Error::InvalidAddedMutation {
                table,
                reason: Box::new(Error::from(*reason)),
            },
            W::RowLockTimeout {
                table,
                row,
                waited_ms,
            } => Error::RowLockTimeout {
                table,
                row,
                waited_ms,
            },
            W::UniqueViolation { table, row } => Error::UniqueViolation { table, row },
            W::IndexNotReady(i) => Error::IndexNotReady(i),
            W::IndexTableWrite(t) => Error::IndexTableWrite(t),
            W::IndexNotFound(i) => Error::IndexNotFound(i),
            W::ReadOnlyTable { table, missing } => Error::ReadOnlyTable { table, missing },
            W::FilterParse { pos, msg } => Error::FilterParse {
                pos: usize_of(pos),
                msg,
            },
        }
    }
}
