//! Where [`crate::EtcdCoordination`] keeps each fact in etcd, and how each value is
//! written. Every key starts with the store's prefix `P` (`/basalt` by default), so several
//! clusters (or tests) share one etcd without seeing each other; a region is
//! `<table>/<region>`, the table as `namespace:qualifier` (no `/` in either) and the region
//! id in 20 digits, so a table's keys are one prefix and sort by id.
//!
//! | key | value | lease |
//! | --- | --- | --- |
//! | `P/nodes/<process>` | the process name's last node generation (decimal) | none |
//! | `P/leases/<lease:016x>` | `<node generation> <process>` | the lease |
//! | `P/owners/<table>/<region>` | the owner's region generation (decimal) | the owner's |
//! | `P/generations/<table>/<region>` | `<generation> <lease:016x> held\|released <process>` | none |
//! | `P/catalog/<table>/<region>` | the record's start and end rows ([`encode_record`]) | none |
//! | `P/manifests/<table>/<region>` | the manifest pointer's bytes | none |
//! | `P/servers/<process>` | a registered server ([`ServerRecord`]): `<node generation> <start ms> <info port> <rpc address>` | the server's |
//! | `P/master` | the elected master: `<node generation> <process>` | the master's |
//! | `P/assign/<table>/<region>` | the server the master assigned the region to: `<term> <process>` | none |
//! | `P/moves/<table>/<region>` | a request to move the region (with its table group when grouped): the target server, or empty for any other | none |
//! | `P/balancer` | the balancer switch: `on` or `off` (absent: on) | none |
//! | `P/balance` | a request for one balancing pass, switch or not (any value) | none |
//! | `P/placement/<table>` | how the table's regions are placed: `grouped` (`spread` when absent) | none |
//! | `P/holds/<lease:016x>/<table>[/<region:016x>]` | a schema change's hold on the table, or a merge's on one of its regions: `<operation> <client>` | the client's |
//! | `P/procedures/<id:016x>` | a split or merge and where it stands (`procedures::ProcedureRecord`: a version byte, then postcard) | none |
//!
//! Invariants: the values are written only by transactions of `coordination`, `assignment`
//! (the master's), `admin` (requests, which the master deletes once acted on),
//! `procedures` (created by clients, run and updated by the master) and `election`; `coordination` writes an owner key and its generation key together; a generation key's generation only grows,
//! and it outlives its owner key (which etcd deletes with the owner's lease), so a dead
//! owner is still known. Parsing a value that does not have its key's shape is an error
//! ([`Error::Corruption`]), never a default.

use basalt_core::coord::RegionKey;
use basalt_core::{Error, Result, TableName};
use bytes::Bytes;

/// The keys of one store, under its prefix.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    /// The keys under `prefix` (a trailing `/` is dropped; empty: the root).
    pub(crate) fn new(prefix: &str) -> Self {
        Keys {
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }

    /// The prefix, without a trailing `/`.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn region_key(&self, kind: &str, region: &RegionKey) -> Vec<u8> {
        format!(
            "{}/{kind}/{}/{:020}",
            self.prefix, region.table, region.region
        )
        .into_bytes()
    }

    /// `P/nodes/<process>`.
    pub(crate) fn node(&self, process: &str) -> Vec<u8> {
        format!("{}/nodes/{process}", self.prefix).into_bytes()
    }

    /// `P/leases/<lease:016x>`.
    pub(crate) fn lease(&self, lease: u64) -> Vec<u8> {
        format!("{}/leases/{lease:016x}", self.prefix).into_bytes()
    }

    /// `P/owners/<table>/<region>`.
    pub(crate) fn owner(&self, region: &RegionKey) -> Vec<u8> {
        self.region_key("owners", region)
    }

    /// `P/generations/<table>/<region>`.
    pub(crate) fn generation(&self, region: &RegionKey) -> Vec<u8> {
        self.region_key("generations", region)
    }

    /// `P/catalog/<table>/<region>`.
    pub(crate) fn catalog(&self, region: &RegionKey) -> Vec<u8> {
        self.region_key("catalog", region)
    }

    /// The prefix of `table`'s catalog keys, `P/catalog/<table>/`.
    pub(crate) fn catalog_prefix(&self, table: &TableName) -> Vec<u8> {
        format!("{}/catalog/{table}/", self.prefix).into_bytes()
    }

    /// `P/manifests/<table>/<region>`.
    pub(crate) fn manifest(&self, region: &RegionKey) -> Vec<u8> {
        self.region_key("manifests", region)
    }

    /// `P/servers/<process>`.
    pub(crate) fn server(&self, process: &str) -> Vec<u8> {
        format!("{}/servers/{process}", self.prefix).into_bytes()
    }

    /// The prefix of every server key, `P/servers/`.
    pub(crate) fn servers_prefix(&self) -> Vec<u8> {
        format!("{}/servers/", self.prefix).into_bytes()
    }

    /// The process name at the end of a server key.
    pub(crate) fn server_of(&self, key: &[u8]) -> Result<String> {
        let prefix = self.servers_prefix();
        key.strip_prefix(prefix.as_slice())
            .and_then(|p| std::str::from_utf8(p).ok())
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .ok_or_else(|| corrupt(key, "a server key must end with a process name"))
    }

    /// The prefix of every region's keys of kind `kind` (`owners`, `catalog`, `assign`):
    /// `P/<kind>/`.
    pub(crate) fn kind_prefix(&self, kind: &str) -> Vec<u8> {
        format!("{}/{kind}/", self.prefix).into_bytes()
    }

    /// `P/assign/<table>/<region>`.
    pub(crate) fn assignment(&self, region: &RegionKey) -> Vec<u8> {
        self.region_key("assign", region)
    }

    /// `P/procedures/<id:016x>`.
    pub(crate) fn procedure(&self, id: u64) -> Vec<u8> {
        format!("{}/procedures/{id:016x}", self.prefix).into_bytes()
    }

    /// The id of a procedure's key.
    pub(crate) fn procedure_of(&self, key: &[u8]) -> Result<u64> {
        let text = String::from_utf8_lossy(key);
        text.rsplit('/')
            .next()
            .filter(|id| id.len() == 16)
            .and_then(|id| u64::from_str_radix(id, 16).ok())
            .ok_or_else(|| corrupt(key, "a procedure key must end with a 16-digit hex id"))
    }

    /// `P/moves/<table>/<region>`.
    pub(crate) fn move_request(&self, region: &RegionKey) -> Vec<u8> {
        self.region_key("moves", region)
    }

    /// `P/balancer`.
    pub(crate) fn balancer(&self) -> Vec<u8> {
        format!("{}/balancer", self.prefix).into_bytes()
    }

    /// `P/balance`.
    pub(crate) fn balance_request(&self) -> Vec<u8> {
        format!("{}/balance", self.prefix).into_bytes()
    }

    /// `P/placement/<table>`.
    pub(crate) fn placement(&self, table: &TableName) -> Vec<u8> {
        format!("{}/placement/{table}", self.prefix).into_bytes()
    }

    /// The table a key `P/placement/<table>` names.
    pub(crate) fn placement_table(&self, key: &[u8]) -> Result<TableName> {
        let prefix = self.kind_prefix("placement");
        key.strip_prefix(prefix.as_slice())
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| TableName::parse(t).ok())
            .ok_or_else(|| corrupt(key, "a placement key ends with a table name"))
    }

    /// The key of a schema hold under `lease` on `table`, or on its region `region` alone:
    /// `P/holds/<lease:016x>/<table>[/<region:016x>]`.
    pub(crate) fn hold(&self, lease: u64, table: &TableName, region: Option<u64>) -> Vec<u8> {
        match region {
            None => format!("{}/holds/{lease:016x}/{table}", self.prefix),
            Some(r) => format!("{}/holds/{lease:016x}/{table}/{r:016x}", self.prefix),
        }
        .into_bytes()
    }

    /// The lease, the table and the region (none: the whole table) a hold key names.
    pub(crate) fn hold_of(&self, key: &[u8]) -> Result<(u64, TableName, Option<u64>)> {
        let prefix = self.kind_prefix("holds");
        let parsed = key
            .strip_prefix(prefix.as_slice())
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| t.split_once('/'))
            .and_then(|(lease, rest)| {
                let lease = u64::from_str_radix(lease, 16).ok()?;
                let (table, region) = match rest.split_once('/') {
                    None => (rest, None),
                    Some((table, region)) if region.len() == 16 => {
                        (table, Some(u64::from_str_radix(region, 16).ok()?))
                    }
                    Some(_) => return None,
                };
                Some((lease, TableName::parse(table).ok()?, region))
            });
        parsed.ok_or_else(|| corrupt(key, "a hold key is <lease>/<table>[/<region>]"))
    }

    /// The region a key `P/<kind>/<table>/<region>` names.
    pub(crate) fn region_key_of(&self, kind: &str, key: &[u8]) -> Result<RegionKey> {
        let prefix = self.kind_prefix(kind);
        let rest = key
            .strip_prefix(prefix.as_slice())
            .and_then(|r| std::str::from_utf8(r).ok())
            .ok_or_else(|| corrupt(key, "not a region key of its kind"))?;
        let (table, id) = rest
            .rsplit_once('/')
            .ok_or_else(|| corrupt(key, "a region key is <table>/<region>"))?;
        let id = id
            .parse()
            .map_err(|_| corrupt(key, "a region key must end with a region id"))?;
        let table = TableName::parse(table).map_err(|_| corrupt(key, "not a table name"))?;
        Ok(RegionKey::new(table, id))
    }

    /// `P/master`.
    pub(crate) fn master(&self) -> Vec<u8> {
        format!("{}/master", self.prefix).into_bytes()
    }

    /// The region id at the end of a catalog key.
    pub(crate) fn region_of(&self, key: &[u8]) -> Result<u64> {
        let text = String::from_utf8_lossy(key);
        text.rsplit('/')
            .next()
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| corrupt(key, "a catalog key must end with a region id"))
    }
}

/// The end of the range of keys starting with `prefix` (etcd's `range_end`): the prefix
/// with its last byte below 0xff raised by one.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // every key
}

/// A value of key `key` that does not have its shape.
pub(crate) fn corrupt(key: &[u8], reason: &str) -> Error {
    Error::corruption(
        String::from_utf8_lossy(key).into_owned(),
        0,
        format!("etcd value: {reason}"),
    )
}

/// A decimal number (a node generation, an owner key's generation).
pub(crate) fn parse_u64(key: &[u8], value: &[u8]) -> Result<u64> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| corrupt(key, "expected a decimal number"))
}

/// The value of a generation key: the region's last owner and its generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GenerationRecord {
    /// The region's generation (only grows).
    pub(crate) generation: u64,
    /// The lease of the owner that got it.
    pub(crate) lease: u64,
    /// Whether that owner gave the region up (an owner whose lease ended did not).
    pub(crate) released: bool,
    /// The owner's process name.
    pub(crate) process: String,
}

impl GenerationRecord {
    /// `<generation> <lease:016x> held|released <process>`.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let state = if self.released { "released" } else { "held" };
        format!(
            "{} {:016x} {state} {}",
            self.generation, self.lease, self.process
        )
        .into_bytes()
    }

    /// Reads what [`GenerationRecord::encode`] wrote under `key`.
    pub(crate) fn decode(key: &[u8], value: &[u8]) -> Result<Self> {
        let bad = || {
            corrupt(
                key,
                "expected `<generation> <lease> held|released <process>`",
            )
        };
        let text = std::str::from_utf8(value).map_err(|_| bad())?;
        let mut parts = text.splitn(4, ' ');
        let generation = parts.next().and_then(|g| g.parse().ok()).ok_or_else(bad)?;
        let lease = parts
            .next()
            .and_then(|l| u64::from_str_radix(l, 16).ok())
            .ok_or_else(bad)?;
        let released = match parts.next() {
            Some("held") => false,
            Some("released") => true,
            _ => return Err(bad()),
        };
        let process = parts.next().ok_or_else(bad)?.to_string();
        Ok(GenerationRecord {
            generation,
            lease,
            released,
            process,
        })
    }
}

/// The value of a lease key: `<node generation> <process>`.
pub(crate) fn encode_lease(node_generation: u64, process: &str) -> Vec<u8> {
    format!("{node_generation} {process}").into_bytes()
}

/// Reads what [`encode_lease`] wrote under `key`: the node generation and the process.
pub(crate) fn decode_lease(key: &[u8], value: &[u8]) -> Result<(u64, String)> {
    let bad = || corrupt(key, "expected `<node generation> <process>`");
    let text = std::str::from_utf8(value).map_err(|_| bad())?;
    let (generation, process) = text.split_once(' ').ok_or_else(bad)?;
    let generation = generation.parse().map_err(|_| bad())?;
    Ok((generation, process.to_string()))
}

/// The value of a server key: what a region server registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerRecord {
    /// The node generation of the lease it registered under.
    pub(crate) node_generation: u64,
    /// When the server started, in milliseconds since the Unix epoch.
    pub(crate) started_ms: u64,
    /// The port of its status page.
    pub(crate) info_port: u16,
    /// Where its RPC service listens (`host:port`).
    pub(crate) rpc_address: String,
}

impl ServerRecord {
    /// `<node generation> <start ms> <info port> <rpc address>`.
    pub(crate) fn encode(&self) -> Vec<u8> {
        format!(
            "{} {} {} {}",
            self.node_generation, self.started_ms, self.info_port, self.rpc_address
        )
        .into_bytes()
    }

    /// Reads what [`ServerRecord::encode`] wrote under `key`.
    pub(crate) fn decode(key: &[u8], value: &[u8]) -> Result<Self> {
        let bad = || {
            corrupt(
                key,
                "expected `<node generation> <start ms> <info port> <rpc address>`",
            )
        };
        let text = std::str::from_utf8(value).map_err(|_| bad())?;
        let mut parts = text.splitn(4, ' ');
        let mut number = || parts.next().and_then(|n| n.parse::<u64>().ok());
        let node_generation = number().ok_or_else(bad)?;
        let started_ms = number().ok_or_else(bad)?;
        let info_port = number()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(bad)?;
        let rpc_address = parts.next().ok_or_else(bad)?.to_string();
        Ok(ServerRecord {
            node_generation,
            started_ms,
            info_port,
            rpc_address,
        })
    }
}

/// A catalog record's value: the start row's length (4 bytes, big-endian), the start row,
/// the end row.
pub(crate) fn encode_record(start: &[u8], end: &[u8]) -> Result<Vec<u8>> {
    let len = u32::try_from(start.len())
        .map_err(|_| Error::bad_argument("a region's start row is over 4 GiB"))?;
    let mut out = Vec::with_capacity(4 + start.len() + end.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(start);
    out.extend_from_slice(end);
    Ok(out)
}

/// Reads what [`encode_record`] wrote under `key`: the start and end rows.
pub(crate) fn decode_record(key: &[u8], value: &[u8]) -> Result<(Bytes, Bytes)> {
    let bad = || corrupt(key, "a catalog record shorter than its start row");
    let (len, rest) = value.split_first_chunk::<4>().ok_or_else(bad)?;
    let len = usize::try_from(u32::from_be_bytes(*len)).map_err(|_| bad())?;
    if rest.len() < len {
        return Err(bad());
    }
    let (start, end) = rest.split_at(len);
    Ok((Bytes::copy_from_slice(start), Bytes::copy_from_slice(end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_under_the_prefix_and_a_table_is_one_prefix() {
        let k = Keys::new("/basalt/");
        let r = RegionKey::new(TableName::parse("orders").unwrap(), 7);
        assert_eq!(
            k.owner(&r),
            b"/basalt/owners/default:orders/00000000000000000007"
        );
        let catalog = k.catalog(&r);
        assert!(catalog.starts_with(&k.catalog_prefix(&r.table)));
        assert_eq!(k.region_of(&catalog).unwrap(), 7);
        // "orders2" is not under "orders"'s prefix.
        let other = RegionKey::new(TableName::parse("orders2").unwrap(), 1);
        assert!(!k.catalog(&other).starts_with(&k.catalog_prefix(&r.table)));
        assert_eq!(k.lease(255), b"/basalt/leases/00000000000000ff");
        assert_eq!(k.server_of(&k.server("rs-1")).unwrap(), "rs-1");
        assert!(k.server_of(&k.servers_prefix()).is_err());
        assert_eq!(k.master(), b"/basalt/master");
        let t = TableName::parse("ns:events").unwrap();
        assert_eq!(k.placement_table(&k.placement(&t)).unwrap(), t);
        assert_eq!(
            k.hold(0xab, &t, None),
            b"/basalt/holds/00000000000000ab/ns:events"
        );
        assert_eq!(
            k.hold_of(&k.hold(0xab, &t, None)).unwrap(),
            (0xab, t.clone(), None)
        );
        assert_eq!(
            k.hold(0xab, &t, Some(7)),
            b"/basalt/holds/00000000000000ab/ns:events/0000000000000007"
        );
        assert_eq!(
            k.hold_of(&k.hold(0xab, &t, Some(7))).unwrap(),
            (0xab, t, Some(7))
        );
        assert!(k
            .hold_of(b"/basalt/holds/00000000000000ab/ns:events/7")
            .is_err());
        assert!(k.hold_of(b"/basalt/holds/zz/ns:events").is_err());
        assert!(k.hold_of(b"/basalt/holds/00000000000000ab").is_err());
        assert!(k.placement_table(b"/basalt/placement/bad name").is_err());
    }

    #[test]
    fn prefix_end_is_the_first_key_past_the_prefix() {
        assert_eq!(prefix_end(b"/a/"), b"/a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
    }

    #[test]
    fn values_round_trip_and_bad_ones_are_errors() {
        let g = GenerationRecord {
            generation: 3,
            lease: 0x1234,
            released: true,
            process: "rs a".into(),
        };
        assert_eq!(GenerationRecord::decode(b"k", &g.encode()).unwrap(), g);
        assert!(GenerationRecord::decode(b"k", b"3 zz held p").is_err());
        assert!(GenerationRecord::decode(b"k", b"3 12 gone p").is_err());
        assert_eq!(
            decode_lease(b"k", &encode_lease(2, "rs-a")).unwrap(),
            (2, "rs-a".to_string())
        );
        let rec = encode_record(b"m", b"x").unwrap();
        assert_eq!(
            decode_record(b"k", &rec).unwrap(),
            (Bytes::from_static(b"m"), Bytes::from_static(b"x"))
        );
        assert!(decode_record(b"k", &[0, 0, 0, 9, 1]).is_err());
        assert!(parse_u64(b"k", b"x1").is_err());
        let server = ServerRecord {
            node_generation: 4,
            started_ms: 1_700_000_000_000,
            info_port: 16030,
            rpc_address: "[::1]:16020".into(),
        };
        assert_eq!(
            ServerRecord::decode(b"k", &server.encode()).unwrap(),
            server
        );
        assert!(ServerRecord::decode(b"k", b"4 17 70000 h:1").is_err());
        assert!(ServerRecord::decode(b"k", b"4 17 80").is_err());
    }
}
