//! Namespace and table commands: `create`, `list`, `describe`, `exists`,
//! `enable`/`disable`, `is_enabled`/`is_disabled`, `drop`, `truncate` and the namespace
//! commands (the region commands are in `regions`, `status` in `cluster`).
//!
//! Table names print as HBase prints them: the bare name in the default namespace,
//! `ns:name` elsewhere.

use super::args::{as_bool, as_int, as_string, key_name, Args};
use super::binary::{to_bytes_binary, to_string_binary};
use super::parse::Value;
use super::ShellError;
use basalt_core::client::Backend;
use basalt_core::{
    BloomType, ColumnFamilyDescriptor, Compression, Connection, HashedPart, KeepDeletedCells,
    PreSplit, SaltSpec, SplitAlgorithm, TableDescriptor, TableName, DEFAULT_NAMESPACE,
};

/// How HBase's shell prints a table name.
pub fn show_name(t: &TableName) -> String {
    if t.namespace() == DEFAULT_NAMESPACE {
        t.qualifier().to_string()
    } else {
        t.to_string()
    }
}

/// The optional pattern of `list` and `list_namespace` (the first argument), anchored at
/// both ends as HBase's.
fn pattern_arg(a: &Args<'_>) -> Result<Option<regex::Regex>, ShellError> {
    if a.vals.is_empty() {
        return Ok(None);
    }
    let pat = a.string(0, "the pattern")?;
    let re = regex::Regex::new(&format!("^(?:{pat})$")).map_err(|e| {
        a.usage(format!(
            "bad regular expression: {}",
            e.to_string().replace('\n', " ")
        ))
    })?;
    Ok(Some(re))
}

/// A one-column listing as HBase's shell prints it: the header, a line a name, the count.
fn print_names(out: &mut String, header: &str, names: &[String]) {
    out.push_str(header);
    out.push('\n');
    for n in names {
        out.push_str(&format!("{n}\n"));
    }
    out.push_str(&format!("{} row(s)\n", names.len()));
}

/// The `i`-th argument as a table name.
pub fn table_arg(a: &Args<'_>, i: usize) -> Result<TableName, ShellError> {
    Ok(TableName::parse(&a.string(i, "the table name")?)?)
}

/// The table name of a command that takes it alone.
pub(super) fn only_table_arg(a: &Args<'_>) -> Result<TableName, ShellError> {
    a.count(1, 1)?;
    table_arg(a, 0)
}

fn int_opt(a: &Args<'_>, key: &str, v: &Value, min: i64, max: i64) -> Result<i64, ShellError> {
    match as_int(v) {
        Some(n) if n >= min && n <= max => Ok(n),
        _ => Err(a.usage(format!(
            "{key} must be an integer from {min} to {max}, not {v}"
        ))),
    }
}

fn bool_opt(a: &Args<'_>, key: &str, v: &Value) -> Result<bool, ShellError> {
    as_bool(v).ok_or_else(|| a.usage(format!("{key} must be true or false, not {v}")))
}

pub(super) fn family(
    a: &Args<'_>,
    pairs: &[(Value, Value)],
    out: &mut String,
) -> Result<ColumnFamilyDescriptor, ShellError> {
    let name = pairs
        .iter()
        .find(|(k, _)| key_name(k).as_deref() == Some("NAME"))
        .and_then(|(_, v)| as_string(v))
        .ok_or_else(|| a.usage("a family hash needs NAME => 'family'"))?;
    let mut cf = ColumnFamilyDescriptor::new(to_bytes_binary(&name));
    for (k, v) in pairs {
        let key =
            key_name(k).ok_or_else(|| a.usage(format!("hash keys are names, not {}", k.kind())))?;
        let text = as_string(v)
            .map(|s| s.to_ascii_uppercase())
            .unwrap_or_default();
        cf = match key.as_str() {
            "NAME" => cf,
            "VERSIONS" => cf.max_versions(int_opt(a, &key, v, 1, u32::MAX as i64)? as u32),
            "MIN_VERSIONS" => cf.min_versions(int_opt(a, &key, v, 0, u32::MAX as i64)? as u32),
            "TTL" => {
                if text == "FOREVER" {
                    cf
                } else {
                    cf.ttl_secs(int_opt(a, &key, v, 1, i64::MAX)? as u64)
                }
            }
            "BLOCKSIZE" => cf.block_size(int_opt(a, &key, v, 1, u32::MAX as i64)? as u32),
            "BLOCKCACHE" => cf.block_cache(bool_opt(a, &key, v)?),
            "IN_MEMORY" => cf.in_memory(bool_opt(a, &key, v)?),
            "KEEP_DELETED_CELLS" => cf.keep_deleted_cells(match text.as_str() {
                "TTL" => KeepDeletedCells::Ttl,
                _ => KeepDeletedCells::from(bool_opt(a, &key, v)?),
            }),
            "COMPRESSION" => cf.compression(match text.as_str() {
                "NONE" => Compression::None,
                "LZ4" => Compression::Lz4,
                "ZSTD" => Compression::Zstd,
                "SNAPPY" => Compression::Snappy,
                _ => {
                    return Err(ShellError::Unsupported(format!(
                        "Basalt has no compression {v}: use NONE, LZ4, ZSTD or SNAPPY"
                    )))
                }
            }),
            "BLOOMFILTER" => cf.bloom(match text.as_str() {
                "NONE" => BloomType::None,
                "ROW" => BloomType::Row,
                "ROWCOL" => BloomType::RowCol,
                _ => {
                    return Err(ShellError::Unsupported(format!(
                        "Basalt has no bloom filter {v}: use NONE, ROW or ROWCOL"
                    )))
                }
            }),
            other => {
                out.push_str(&format!(
                    "Unknown argument ignored for column family {name}: {other}\n"
                ));
                cf
            }
        };
    }
    Ok(cf)
}

pub(super) async fn create<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    if a.vals.len() < 2 {
        return Err(a.usage("give a table name and at least one column family"));
    }
    let name = table_arg(a, 0)?;
    let mut desc = TableDescriptor::new(name.clone());
    let mut split = PreSplit::None;
    let (mut numregions, mut algo) = (None, None);
    for v in &a.vals[1..] {
        match v {
            Value::Str(f) => desc = desc.family(ColumnFamilyDescriptor::new(to_bytes_binary(f))),
            Value::Hash(pairs)
                if pairs
                    .iter()
                    .any(|(k, _)| key_name(k).as_deref() == Some("NAME")) =>
            {
                desc = desc.family(family(a, pairs, out)?)
            }
            Value::Hash(pairs) => {
                for (k, v) in pairs {
                    let key = key_name(k)
                        .ok_or_else(|| a.usage(format!("hash keys are names, not {}", k.kind())))?;
                    match key.as_str() {
                        "SPLITS" => {
                            let Value::Array(items) = v else {
                                return Err(a.usage("SPLITS must be an array of strings"));
                            };
                            let keys = items
                                .iter()
                                .map(|i| as_string(i).map(|s| to_bytes_binary(&s)))
                                .collect::<Option<Vec<_>>>()
                                .ok_or_else(|| a.usage("SPLITS must be an array of strings"))?;
                            split = PreSplit::Keys(keys);
                        }
                        "SPLITS_FILE" => {
                            let path = as_string(v).ok_or_else(|| a.usage("SPLITS_FILE must be a file name"))?;
                            let text = std::fs::read_to_string(&path).map_err(|e| {
                                a.usage(format!("cannot read SPLITS_FILE {path}: {e}"))
                            })?;
                            split = PreSplit::Keys(
                                text.lines()
                                    .map(str::trim)
                                    .filter(|l| !l.is_empty())
                                    .map(to_bytes_binary)
                                    .collect(),
                            );
                        }
                        "SALT_BUCKETS" => {
                            let n = int_opt(a, &key, v, 1, 65_536)? as u32;
                            let spec = desc.salt.take().map_or(SaltSpec::new(n), |s| SaltSpec { buckets: n, ..s });
                            desc = desc.salt(spec);
                        }
                        "SALT_HASH_PREFIX" => {
                            let n = int_opt(a, &key, v, 1, u32::MAX as i64)? as u32;
                            let spec = desc.salt.take().unwrap_or_else(|| SaltSpec::new(0));
                            desc = desc.salt(spec.hash_prefix(n));
                        }
                        "NUMREGIONS" => numregions = Some(int_opt(a, &key, v, 2, 1 << 20)? as usize),
                        "SPLITALGO" => {
                            algo = Some(match as_string(v).as_deref() {
                                Some("HexStringSplit") => SplitAlgorithm::HexString,
                                Some("DecimalStringSplit") => SplitAlgorithm::DecimalString,
                                Some("UniformSplit") => SplitAlgorithm::Uniform,
                                _ => {
                                    return Err(ShellError::Unsupported(format!(
                                        "Basalt has no split algorithm {v}: use HexStringSplit, DecimalStringSplit or UniformSplit"
                                    )))
                                }
                            })
                        }
                        other => out.push_str(&format!("Unknown argument ignored: {other}\n")),
                    }
                }
            }
            other => {
                return Err(a.usage(format!(
                    "a family is a name or a hash, not {}",
                    other.kind()
                )))
            }
        }
    }
    match (numregions, algo) {
        (Some(n), Some(alg)) => split = PreSplit::Algorithm(alg, n),
        (None, None) => {}
        _ => return Err(a.usage("NUMREGIONS and SPLITALGO go together")),
    }
    if desc.families.is_empty() {
        return Err(a.usage("give at least one column family"));
    }
    if desc.salt.as_ref().is_some_and(|s| s.buckets == 0) {
        return Err(a.usage("SALT_HASH_PREFIX needs SALT_BUCKETS"));
    }
    conn.admin().create_table_with_splits(desc, split).await?;
    out.push_str(&format!("Created table {}\n", show_name(&name)));
    Ok(())
}

pub(super) async fn list<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(0, 1)?;
    let re = pattern_arg(a)?;
    let mut names: Vec<String> = conn
        .admin()
        .list_tables()
        .await?
        .iter()
        .map(|d| show_name(&d.name))
        .filter(|n| re.as_ref().is_none_or(|r| r.is_match(n)))
        .collect();
    names.sort();
    print_names(out, "TABLE", &names);
    Ok(())
}

/// A family's settings as HBase's `describe` prints them: `{NAME => 'f', VERSIONS => '1',
/// ...}`.
pub fn family_settings(f: &ColumnFamilyDescriptor) -> String {
    let ttl = f
        .ttl_secs
        .map(|s| format!("{s} SECONDS"))
        .unwrap_or_else(|| "FOREVER".into());
    let kdc = format!("{:?}", f.keep_deleted_cells).to_uppercase();
    let compression = format!("{:?}", f.compression).to_uppercase();
    let bloom = format!("{:?}", f.bloom).to_uppercase();
    format!(
        "{{NAME => '{}', VERSIONS => '{}', MIN_VERSIONS => '{}', TTL => '{}', KEEP_DELETED_CELLS => '{}', COMPRESSION => '{}', BLOOMFILTER => '{}', BLOCKSIZE => '{}', BLOCKCACHE => '{}', IN_MEMORY => '{}'}}",
        to_string_binary(&f.name),
        f.max_versions,
        f.min_versions,
        ttl, kdc, compression, bloom,
        f.block_size,
        f.block_cache,
        f.in_memory,
    )
}

pub(super) async fn describe<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let name = only_table_arg(a)?;
    let admin = conn.admin();
    let d = admin.describe_table(name.clone()).await?;
    let state = if admin.is_table_enabled(name.clone()).await? {
        "ENABLED"
    } else {
        "DISABLED"
    };
    out.push_str(&format!(
        "Table {} is {state}\n{}\nCOLUMN FAMILIES DESCRIPTION\n",
        show_name(&name),
        show_name(&name)
    ));
    for f in &d.families {
        out.push_str(&family_settings(f));
        out.push('\n');
    }
    if let Some(salt) = &d.salt {
        let part = match &salt.part {
            HashedPart::WholeKey => "WHOLE_KEY".to_string(),
            HashedPart::Prefix(n) => format!("PREFIX({n})"),
            HashedPart::Component { index, .. } => format!("COMPONENT({index})"),
        };
        out.push_str(&format!(
            "TABLE_ATTRIBUTES => {{SALT_BUCKETS => '{}', SALT_HASH => '{:?}', SALT_FORMAT => '{:?}', SALTED_PART => '{part}'}}\n",
            salt.buckets, salt.hash, salt.format
        ));
    }
    out.push_str(&format!("{} row(s)\n", d.families.len()));
    Ok(())
}

pub(super) async fn exists<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let name = only_table_arg(a)?;
    let e = conn.admin().table_exists(name.clone()).await?;
    out.push_str(&format!(
        "Table {} {} exist\n",
        show_name(&name),
        if e { "does" } else { "does not" }
    ));
    Ok(())
}

pub(super) async fn enable<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    on: bool,
) -> Result<(), ShellError> {
    let name = only_table_arg(a)?;
    let admin = conn.admin();
    if admin.is_table_enabled(name.clone()).await? == on {
        return Err(ShellError::Unsupported(format!(
            "Table {} is already {}",
            show_name(&name),
            if on { "enabled" } else { "disabled" }
        )));
    }
    if on {
        admin.enable_table(name).await?;
    } else {
        admin.disable_table(name).await?;
    }
    Ok(())
}

pub(super) async fn is_enabled<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    want: bool,
    out: &mut String,
) -> Result<(), ShellError> {
    let on = conn.admin().is_table_enabled(only_table_arg(a)?).await?;
    out.push_str(&format!("{}\n", on == want));
    Ok(())
}

pub(super) async fn drop<B: Backend>(conn: &Connection<B>, a: &Args<'_>) -> Result<(), ShellError> {
    let name = only_table_arg(a)?;
    let admin = conn.admin();
    if admin.is_table_enabled(name.clone()).await? {
        let n = show_name(&name);
        return Err(ShellError::Unsupported(format!(
            "Table {n} is enabled. Disable it first with disable '{n}'."
        )));
    }
    admin.delete_table(name).await?;
    Ok(())
}

pub(super) async fn truncate<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let name = only_table_arg(a)?;
    let admin = conn.admin();
    let desc = admin.describe_table(name.clone()).await?;
    // `truncate_preserve` keeps the region boundaries; a salted table is pre-split by its
    // buckets when created again either way.
    let split = if a.cmd == "truncate_preserve" && desc.salt.is_none() {
        let keys: Vec<Vec<u8>> = admin
            .regions(name.clone())
            .await?
            .iter()
            .skip(1)
            .map(|r| r.start_key.to_vec())
            .collect();
        if keys.is_empty() {
            PreSplit::None
        } else {
            PreSplit::Keys(keys)
        }
    } else {
        PreSplit::None
    };
    out.push_str(&format!(
        "Truncating '{}' table (it may take a while):\n",
        show_name(&name)
    ));
    if admin.is_table_enabled(name.clone()).await? {
        out.push_str("Disabling table...\n");
        admin.disable_table(name.clone()).await?;
    }
    out.push_str("Truncating table...\n");
    admin.delete_table(name).await?;
    admin.create_table_with_splits(desc, split).await?;
    Ok(())
}

pub(super) async fn namespace<B: Backend>(
    conn: &Connection<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    let admin = conn.admin();
    match a.cmd {
        "list_namespace" => {
            a.count(0, 1)?;
            let mut ns = admin.list_namespaces().await?;
            if let Some(re) = pattern_arg(a)? {
                ns.retain(|n| re.is_match(n));
            }
            ns.sort();
            print_names(out, "NAMESPACE", &ns);
        }
        "list_namespace_tables" => {
            a.count(1, 1)?;
            let ns = a.string(0, "the namespace")?;
            if !admin.list_namespaces().await?.contains(&ns) {
                return Err(basalt_core::Error::NamespaceNotFound(ns).into());
            }
            let mut names: Vec<String> = admin
                .list_tables()
                .await?
                .into_iter()
                .filter(|d| d.name.namespace() == ns)
                .map(|d| d.name.qualifier().to_string())
                .collect();
            names.sort();
            print_names(out, "TABLE", &names);
        }
        "create_namespace" => {
            a.count(1, 2)?;
            admin
                .create_namespace(&a.string(0, "the namespace")?)
                .await?;
        }
        _ => {
            a.count(1, 1)?;
            let ns = a.string(0, "the namespace")?;
            let tables = admin.list_tables().await?;
            if let Some(t) = tables.iter().find(|d| d.name.namespace() == ns) {
                return Err(ShellError::Unsupported(format!(
                    "Namespace {ns} is not empty (it holds {}): drop its tables first",
                    t.name
                )));
            }
            admin.delete_namespace(&ns).await?;
        }
    }
    Ok(())
}
