//! The built-in aggregations in the shell: `aggregate 't', 'op' [, 'f:q'] [, {STARTROW,
//! STOPROW, TYPE}]` with `op` one of `count`, `sum`, `min`, `max`, `avg`, `std`, `median`,
//! run region by region by the aggregation endpoint (HBase's `AggregationClient`); on a
//! salted table over logical row keys.
//!
//! A column's values are 8-byte big-endian numbers read as TYPE `long` (the default, what
//! `incr` writes), `unsigned` or `double`; cells of another length are skipped (as HBase).

use super::args::{as_string, column, key_name, Args};
use super::binary::to_bytes_binary;
use super::ddl::table_arg;
use super::parse::Value;
use super::ShellError;
use crate::datadir::DataDir;
use basalt_coprocessors::{
    AggregationClient, Column, Interpreter, KeyRange, Number, SaltedAggregationClient,
    SaltedEndpoints,
};
use basalt_core::client::Backend;

/// The operations, for usage and errors.
const OPS: &str = "count, sum, min, max, avg, std or median";

fn number(n: Option<Number>) -> String {
    match n {
        None => "nil".into(),
        Some(Number::I64(v)) => v.to_string(),
        Some(Number::U64(v)) => v.to_string(),
        Some(Number::F64(v)) => v.to_string(),
    }
}

fn float(n: Option<f64>) -> String {
    n.map_or("nil".into(), |v| v.to_string())
}

/// `aggregate 't', 'op' [, 'f:q'] [, {STARTROW => 'a', STOPROW => 'b', TYPE => 'long'}]`.
pub(super) async fn aggregate<B: Backend>(
    dir: &DataDir<B>,
    a: &Args<'_>,
    out: &mut String,
) -> Result<(), ShellError> {
    a.count(2, 4)?;
    let table = table_arg(a, 0)?;
    let op = a.string(1, "the operation")?.to_ascii_lowercase();
    let mut col = None;
    let mut opts: &[(Value, Value)] = &[];
    for v in &a.vals[2..] {
        match v {
            Value::Str(s) => match column(s) {
                (f, Some(q)) => col = Some((f, q)),
                (_, None) => return Err(a.usage(format!("'{s}' is not 'family:qualifier'"))),
            },
            Value::Hash(pairs) => opts = pairs,
            other => {
                return Err(a.usage(format!(
                    "expected a column or a hash of options, not {}",
                    other.kind()
                )))
            }
        }
    }
    let (mut start, mut stop, mut interpreter) = (None, None, Interpreter::I64);
    for (k, v) in opts {
        let key = key_name(k).unwrap_or_default();
        let text = || as_string(v).ok_or_else(|| a.usage(format!("{key} must be a string")));
        match key.as_str() {
            "STARTROW" => start = Some(to_bytes_binary(&text()?)),
            "STOPROW" | "ENDROW" => stop = Some(to_bytes_binary(&text()?)),
            "TYPE" => {
                interpreter = match text()?.to_ascii_lowercase().as_str() {
                    "long" | "i64" => Interpreter::I64,
                    "unsigned" | "u64" => Interpreter::U64,
                    "double" | "f64" => Interpreter::F64,
                    t => return Err(a.usage(format!("TYPE '{t}': use long, unsigned or double"))),
                }
            }
            _ => return Err(a.usage(format!("unknown option {k}"))),
        }
    }
    let range = KeyRange {
        start: start.map(Into::into),
        stop: stop.map(Into::into),
    };
    let column = match (&col, op.as_str()) {
        (Some((f, q)), _) => Some(Column::new(f, q, interpreter)),
        (None, "count") => None,
        (None, _) => return Err(a.usage(format!("{op} needs a column 'family:qualifier'"))),
    };
    let desc = dir.conn.admin().describe_table(table.clone()).await?;
    let client = if desc.salt.is_some() {
        let salted = dir.conn.salted_table(table.clone())?;
        Client::Salted(SaltedAggregationClient::new(SaltedEndpoints::new(
            dir.endpoints(),
            &salted,
        )))
    } else {
        Client::Plain(AggregationClient::new(dir.endpoints().clone()), table)
    };
    let answer = match (op.as_str(), &column) {
        ("count", None) => client.fast_row_count(range).await?.to_string(),
        ("count", Some(c)) => client.row_count(range, c).await?.to_string(),
        (_, None) => return Err(a.usage(format!("{op} needs a column 'family:qualifier'"))),
        ("sum", Some(c)) => number(client.sum(range, c).await?),
        ("min", Some(c)) => number(client.min(range, c).await?),
        ("max", Some(c)) => number(client.max(range, c).await?),
        ("avg", Some(c)) => float(client.avg(range, c).await?),
        ("std", Some(c)) => float(client.std(range, c).await?),
        ("median", Some(c)) => number(client.median(range, c).await?),
        (other, _) => return Err(a.usage(format!("unknown operation '{other}': use {OPS}"))),
    };
    out.push_str(&format!("{} = {answer}\n", op.to_ascii_uppercase()));
    Ok(())
}

/// The aggregation client of a plain or a salted table.
enum Client<B: Backend> {
    Plain(AggregationClient<B>, basalt_core::TableName),
    Salted(SaltedAggregationClient<B>),
}

/// Forwards one operation to whichever client this is.
macro_rules! forward {
    ($name:ident, $out:ty) => {
        async fn $name(&self, range: KeyRange, c: &Column) -> basalt_core::Result<$out> {
            match self {
                Client::Plain(p, t) => p.$name(t.clone(), range, c).await,
                Client::Salted(s) => s.$name(range, c).await,
            }
        }
    };
}

impl<B: Backend> Client<B> {
    async fn fast_row_count(&self, range: KeyRange) -> basalt_core::Result<u64> {
        match self {
            Client::Plain(p, t) => p.fast_row_count(t.clone(), range).await,
            Client::Salted(s) => s.fast_row_count(range).await,
        }
    }
    forward!(row_count, u64);
    forward!(sum, Option<Number>);
    forward!(min, Option<Number>);
    forward!(max, Option<Number>);
    forward!(avg, Option<f64>);
    forward!(std, Option<f64>);
    forward!(median, Option<Number>);
}
