//! What an attachment may reach beyond `region`: nothing unless it is granted (argument
//! `grants`, comma-separated). `clock` links WASI's wall clock and monotonic clock (`now`
//! and `resolution`); `random` links WASI's random numbers (`get-random-bytes`, at most
//! 64 KiB a call, and `get-random-u64`). Files, sockets, environment, stdio and exit are
//! never granted: like every import not linked here, they trap when called.
//!
//! Invariant: a grant links functions under the exact interface names (and versions) the
//! component imports, so a component built against any 0.2 WASI release gets them.

use crate::state::HostState;
use basalt_core::{Error, Result};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use wasmtime::component::{Component, ComponentType, Linker, Lower};
use wasmtime::Engine;

/// The most bytes one `get-random-bytes` call returns.
const MAX_RANDOM_BYTES: u64 = 64 << 10;

/// The argument naming an attachment's grants.
pub const GRANTS_ARG: &str = "grants";

/// An attachment's grants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Grants {
    /// WASI's clocks.
    pub clock: bool,
    /// WASI's random numbers.
    pub random: bool,
}

impl Grants {
    /// The grants of `spec` (`clock`, `random`, comma-separated; empty: none).
    pub fn parse(spec: &str) -> Result<Self> {
        let mut g = Grants::default();
        for word in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "clock" => g.clock = true,
                "random" => g.random = true,
                other => {
                    return Err(Error::bad_argument(format!(
                        "unknown grant {other:?}: a plugin may be granted clock and random"
                    )))
                }
            }
        }
        Ok(g)
    }
}

/// WASI's `datetime`.
#[derive(ComponentType, Lower, Clone, Copy)]
#[component(record)]
struct Datetime {
    seconds: u64,
    nanoseconds: u32,
}

fn wall_now() -> Datetime {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Datetime {
        seconds: d.as_secs(),
        nanoseconds: d.subsec_nanos(),
    }
}

/// Links the granted functions under the names `component` imports them by.
pub(crate) fn link(
    linker: &mut Linker<HostState>,
    engine: &Engine,
    component: &Component,
    grants: Grants,
) -> wasmtime::Result<()> {
    let names: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let origin = Instant::now();
    for name in names {
        if grants.clock && name.starts_with("wasi:clocks/wall-clock@0.2.") {
            let mut i = linker.instance(&name)?;
            i.func_wrap("now", |_, (): ()| Ok((wall_now(),)))?;
            i.func_wrap("resolution", |_, (): ()| {
                Ok((Datetime {
                    seconds: 0,
                    nanoseconds: 1,
                },))
            })?;
        } else if grants.clock && name.starts_with("wasi:clocks/monotonic-clock@0.2.") {
            let mut i = linker.instance(&name)?;
            i.func_wrap("now", move |_, (): ()| {
                Ok((u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX),))
            })?;
            i.func_wrap("resolution", |_, (): ()| Ok((1u64,)))?;
        } else if grants.random && name.starts_with("wasi:random/random@0.2.") {
            let mut i = linker.instance(&name)?;
            i.func_wrap("get-random-bytes", |_, (len,): (u64,)| {
                if len > MAX_RANDOM_BYTES {
                    return Err(wasmtime::Error::msg(format!(
                        "get-random-bytes of {len} bytes: at most {MAX_RANDOM_BYTES} a call"
                    )));
                }
                let bytes: Vec<u8> = (0..len).map(|_| rand::random::<u8>()).collect();
                Ok((bytes,))
            })?;
            i.func_wrap("get-random-u64", |_, (): ()| Ok((rand::random::<u64>(),)))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse_and_refuse_what_is_never_granted() {
        assert_eq!(Grants::parse("").unwrap(), Grants::default());
        let both = Grants::parse("clock, random").unwrap();
        assert!(both.clock && both.random);
        for bad in ["files", "clock,network", "env"] {
            assert!(Grants::parse(bad).is_err(), "{bad}");
        }
    }
}
