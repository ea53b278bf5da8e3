//! Seed 000's IM message store: row key = salt(conversation) with 128 buckets | conversation
//! id | reverse message id, with Snowflake ids, written by many concurrent senders.
//!
//! It shows: the latest 20 messages of a conversation (one bucket, one region), the next
//! page of older messages, all messages since a time T across all conversations (fan-out
//! over 128 buckets and merge), and the region report: balanced writes on the salted table
//! against one hot region on the same keys unsalted. Every answer is checked against what the
//! senders wrote; a wrong answer exits non-zero.
//!
//! Run with `cargo run --release --example im_messages`.

use basalt::client::{Put, RowResult, Scan};
use basalt::filter::ColumnValueCondition;
use basalt::keys::{Field, KeySchema, Kind, Snowflake, Value};
use basalt::{
    ColumnFamilyDescriptor, Comparator, Connection, Filter, PreSplit, SaltFormat, SaltSpec,
    SaltedTable, SplitAlgorithm, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::sync::Arc;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const BUCKETS: u32 = 128;
const SENDERS: u16 = 8;
const CONVERSATIONS: usize = 2_000;
const MESSAGES_PER_SENDER: usize = 3_000;

fn check(ok: bool, what: &str) -> Res<()> {
    if ok {
        println!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("WRONG: {what}").into())
    }
}

/// conversation id | message id, newest first (the descending u64 is `u64::MAX - id`, the
/// binary form of seed 000's `Long.MAX_VALUE - id`).
fn schema() -> KeySchema {
    KeySchema::new(vec![Field::new(Kind::U64), Field::new(Kind::U64).desc()])
}

fn key(conv: u64, msg: u64) -> Res<Vec<u8>> {
    Ok(schema().encode(&[Value::U64(conv), Value::U64(msg)])?)
}

/// A row just above every key of `conv` that shares its hashed part (so a range scan up
/// to it is narrowed to the conversation's bucket).
fn conversation_end(conv: u64) -> Res<Vec<u8>> {
    let mut k = key(conv, 0)?;
    k.push(0);
    Ok(k)
}

fn ids(rows: &[RowResult]) -> Res<Vec<(u64, u64)>> {
    rows.iter()
        .map(|r| match schema().decode(&r.row)?.as_slice() {
            [Value::U64(c), Value::U64(m)] => Ok((*c, *m)),
            other => Err(format!("bad key {other:?}").into()),
        })
        .collect()
}

#[tokio::main]
async fn main() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let conn = Connection::open(dir.path()).await?;
    println!("{}", conn.recovery_report());
    let admin = conn.admin();
    admin.create_namespace("im").await?;
    let spec = SaltSpec::new(BUCKETS)
        .format(SaltFormat::Decimal)
        .hash_component(schema(), 0);
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("im:messages")?)
                .family(ColumnFamilyDescriptor::new("m"))
                .salt(spec),
        )
        .await?;
    // The same keys without a salt, pre-split into 16 uniform regions, for comparison.
    admin
        .create_table_with_splits(
            TableDescriptor::new(TableName::parse("im:unsalted")?)
                .family(ColumnFamilyDescriptor::new("m")),
            PreSplit::Algorithm(SplitAlgorithm::Uniform, 16),
        )
        .await?;
    let messages = conn.salted_table("im:messages")?;
    let unsalted = conn.table("im:unsalted")?;
    println!(
        "table im:messages: {} regions, salt = 3 decimal digits of xxh3(conversation id) mod {BUCKETS}",
        messages.regions().await?.len()
    );

    // Conversations get Snowflake ids from worker 0; each sender is its own worker.
    let conv_gen = Snowflake::new(0)?;
    let conversations: Vec<u64> = (0..CONVERSATIONS)
        .map(|_| conv_gen.next_id())
        .collect::<basalt::Result<_>>()?;
    let conversations = Arc::new(conversations);
    println!("{SENDERS} senders write {MESSAGES_PER_SENDER} messages each into {CONVERSATIONS} conversations");
    let start = std::time::Instant::now();
    let mut tasks = Vec::new();
    for worker in 1..=SENDERS {
        let (messages, unsalted, conversations) =
            (messages.clone(), unsalted.clone(), conversations.clone());
        tasks.push(tokio::spawn(async move {
            let gen = Snowflake::new(worker)?;
            let mut sent = Vec::with_capacity(MESSAGES_PER_SENDER);
            for i in 0..MESSAGES_PER_SENDER {
                // Every sender first posts 10 messages to one busy group chat.
                let pick = if i < 10 {
                    0
                } else {
                    (i * 7919 + usize::from(worker) * 104_729) % CONVERSATIONS
                };
                let conv = conversations[pick];
                let id = gen.next_id()?;
                let ts = Snowflake::time_ms_of(id, basalt::keys::snowflake::TWITTER_EPOCH_MS);
                let k = key(conv, id)?;
                let put = |k: &[u8]| {
                    Put::new(k)
                        .add_column("m", "text", format!("hello #{i} from {worker}"))
                        .add_column("m", "ts", ts.to_be_bytes())
                };
                messages.put(put(&k)).await?;
                unsalted.put(put(&k)).await?;
                sent.push((conv, id, ts));
            }
            Res::Ok(sent)
        }));
    }
    let mut model: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for t in tasks {
        for (conv, id, ts) in t.await?? {
            model.entry(conv).or_default().push((id, ts));
        }
    }
    for v in model.values_mut() {
        v.sort_unstable_by_key(|m| std::cmp::Reverse(m.0));
    }
    println!(
        "wrote {} messages in {:.2}s",
        usize::from(SENDERS) * MESSAGES_PER_SENDER,
        start.elapsed().as_secs_f64()
    );

    latest_and_next_page(&messages, &model).await?;
    since(&messages, &model).await?;

    let salted_report = messages.region_report().await?;
    let unsalted_report = unsalted.region_report().await?;
    println!("\n{salted_report}");
    println!("{unsalted_report}");
    let hot = unsalted_report
        .write_shares()
        .into_iter()
        .fold(0.0f64, f64::max);
    println!(
        "salted: busiest/idlest region writes = {:.2}; unsalted: busiest region takes {:.1}% of writes",
        salted_report.write_spread(),
        hot * 100.0
    );
    // Conversations, not messages, are hashed: a bucket's load is its conversations' load,
    // so the busiest of 128 buckets runs somewhat above the mean.
    let salted_max = salted_report
        .write_shares()
        .into_iter()
        .fold(0.0f64, f64::max);
    check(
        salted_max < 2.5 / f64::from(BUCKETS),
        "salted: no region takes more than 2.5x its fair share of writes",
    )?;
    check(hot > 0.9, "unsalted time-ordered keys pile onto one region")?;
    conn.close().await?;
    Ok(())
}

async fn latest_and_next_page(
    messages: &SaltedTable,
    model: &BTreeMap<u64, Vec<(u64, u64)>>,
) -> Res<()> {
    let (&conv, want) = model
        .iter()
        .max_by_key(|(_, v)| v.len())
        .ok_or("no conversation")?;
    println!("\nconversation {conv} has {} messages", want.len());
    let prefix = schema().encode_prefix(&[Value::U64(conv)])?;
    let s = messages.scan(Scan::new().with_prefix(&prefix).limit(20))?;
    let stats = s.stats();
    let page: Vec<RowResult> = s.try_collect().await?;
    let got = ids(&page)?;
    println!(
        "latest 20: read {} rows from {} bucket(s); newest id {}",
        stats.rows_read(),
        stats.buckets_scanned(),
        got.first().map_or(0, |x| x.1)
    );
    let want_ids: Vec<(u64, u64)> = want.iter().take(20).map(|(id, _)| (conv, *id)).collect();
    check(got == want_ids, "latest 20 messages, newest first")?;
    check(
        stats.buckets_scanned() == 1 && stats.rows_read() <= 20,
        "latest 20 read one bucket and at most 20 rows",
    )?;
    // The next page: older than the last message shown.
    let last = got.last().map_or(0, |x| x.1);
    let s = messages.scan(
        Scan::new()
            .start_row(key(conv, last.saturating_sub(1))?)
            .stop_row(conversation_end(conv)?)
            .limit(20),
    )?;
    let stats = s.stats();
    let next: Vec<RowResult> = s.try_collect().await?;
    let want_next: Vec<(u64, u64)> = want
        .iter()
        .skip(20)
        .take(20)
        .map(|(id, _)| (conv, *id))
        .collect();
    println!(
        "next page: {} messages from {} bucket(s)",
        next.len(),
        stats.buckets_scanned()
    );
    check(ids(&next)? == want_next, "next page of older messages")?;
    check(stats.buckets_scanned() == 1, "next page read one bucket")
}

async fn since(messages: &SaltedTable, model: &BTreeMap<u64, Vec<(u64, u64)>>) -> Res<()> {
    let mut all_ts: Vec<u64> = model.values().flatten().map(|(_, ts)| *ts).collect();
    all_ts.sort_unstable();
    let t = all_ts[all_ts.len() * 9 / 10];
    let filter = Filter::SingleColumnValue(
        ColumnValueCondition::new(
            "m",
            "ts",
            basalt::client::CompareOp::GreaterOrEqual,
            Comparator::binary(t.to_be_bytes()),
        )
        .filter_if_missing(true),
    );
    let s = messages.scan(Scan::new().filter(filter))?;
    let stats = s.stats();
    let rows: Vec<RowResult> = s.try_collect().await?;
    let want: Vec<(u64, u64)> = model
        .iter()
        .flat_map(|(c, v)| {
            v.iter()
                .filter(|(_, ts)| *ts >= t)
                .map(move |(id, _)| (*c, *id))
        })
        .collect();
    println!(
        "\nall messages since T={t}: {} rows merged from {} buckets",
        rows.len(),
        stats.buckets_scanned()
    );
    check(ids(&rows)? == want, "all messages since T, in key order")
}
