//! Opening a data directory and keeping it sound: one stage. Recovery builds the engine's
//! shared state from the catalog and the WAL ([`recovery`]), taking over the regions of a
//! stopped engine on a shared store ([`takeover`]); regions are built from their catalog
//! entries ([`regions`]); the directory's lock and the catalog's presence are checked first
//! ([`directory`]); tables whose derived data must be verified are recorded durably
//! ([`pending`]); store files are checked online and offline ([`check`]), a closed
//! directory is repaired ([`repair`]), regions are opened and closed while the engine
//! runs ([`runtime`]: a region server's assignments), and what dead writers left on a
//! shared store (their WALs, the store files no region lists) is collected ([`garbage`]).
//!
//! Rooms, bottom to top: `directory`, `pending`, `check`, `regions`, `takeover`,
//! `recovery`, `runtime`, `garbage`, `repair`.
//!
//! Invariants: an open or a repair holds the directory's lock throughout; no store file the
//! catalog lists is ever deleted here (a missing or unreadable one takes its region offline,
//! naming it); tables whose derived data may disagree with them are recorded before anything
//! changes, and stay recorded until their repairs ran.

pub(crate) mod check;
pub(crate) mod directory;
pub(crate) mod garbage;
pub(crate) mod pending;
pub(crate) mod recovery;
pub(crate) mod regions;
pub(crate) mod repair;
pub(crate) mod runtime;
pub(crate) mod takeover;
