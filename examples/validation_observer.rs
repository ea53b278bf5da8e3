//! Validation observer: a region observer that refuses writes breaking a rule, here "the
//! `info:age` column holds a decimal number from 0 to 150".
//!
//! The rule runs in `pre_batch_mutate`, under the row locks before the WAL append, so it
//! sees every put of every write path (single puts, batches, row mutations, a passed
//! check-and-mutate). A refused put is vetoed with a typed `Error::Coprocessor`: a single
//! put fails with it; in a batch only that operation fails, the others are written.
//!
//! Run with `cargo run --release --example validation_observer`; it prints each step and
//! exits with a non-zero status if anything behaves otherwise.

use async_trait::async_trait;
use basalt::client::{BatchOp, CheckAndMutate, Get, Mutation, Put};
use basalt::coprocessors::{MiniBatch, ObserverContext, RegionObserver, Registry};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Error, Result,
    TableDescriptor, TableName,
};
use std::process::ExitCode;
use std::sync::Arc;

/// Refuses puts whose `info:age` is not a decimal in `0..=150`.
pub struct AgeRule;

/// Why `value` is not a valid age, if it is not.
fn age_problem(value: &[u8]) -> Option<String> {
    let Ok(text) = std::str::from_utf8(value) else {
        return Some("age is not UTF-8 text".to_string());
    };
    let valid = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && text.parse::<u32>().is_ok_and(|n| n <= 150);
    (!valid).then(|| format!("age {text:?} is not a decimal number from 0 to 150"))
}

#[async_trait]
impl RegionObserver for AgeRule {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        let mut refused = Vec::new();
        for (i, m) in batch.operations().enumerate() {
            let Mutation::Put(p) = m else { continue };
            for (family, qualifier, _, value) in p.cells() {
                if family == b"info" && qualifier == b"age" {
                    if let Some(why) = age_problem(value) {
                        refused.push((i, why));
                    }
                }
            }
        }
        for (i, why) in refused {
            batch.veto(
                i,
                Error::Coprocessor {
                    name: ctx.coprocessor_name().to_string(),
                    msg: why,
                },
            );
        }
        Ok(())
    }
}

fn age_put(row: &str, age: &str) -> Put {
    Put::new(row)
        .add_column("info", "name", row)
        .add_column("info", "age", age)
}

/// Runs the demo; returns the checks that failed.
async fn run(dir: &std::path::Path) -> Result<Vec<String>> {
    let mut failed = Vec::new();
    let mut check = |ok: bool, what: &str| {
        println!("  [{}] {what}", if ok { "ok" } else { "WRONG" });
        if !ok {
            failed.push(what.to_string());
        }
    };
    let registry = Arc::new(Registry::new());
    registry.register("age-rule", |_args| {
        Ok(Arc::new(AgeRule) as Arc<dyn RegionObserver>)
    })?;
    let conn = Connection::open_with(Config::new(dir).coprocessor_loader(registry.clone())).await?;
    println!("{}", conn.recovery_report());
    let name = TableName::parse("users")?;
    conn.admin()
        .create_table(
            TableDescriptor::new(name.clone())
                .family(ColumnFamilyDescriptor::new("info"))
                .coprocessor(CoprocessorDescriptor::new("age-rule")),
        )
        .await?;
    let users = conn.table("users")?;
    println!("table users with observer age-rule (info:age must be 0..=150)");

    println!("put ada, age 36");
    let r = users.put(age_put("ada", "36")).await;
    check(r.is_ok(), "a valid age is written");
    for (row, age) in [("bob", "200"), ("cid", "-1"), ("dee", "thirty")] {
        println!("put {row}, age {age:?}");
        match users.put(age_put(row, age)).await {
            Err(e @ Error::Coprocessor { .. }) => {
                println!("    refused: {e}");
                check(true, "refused with Error::Coprocessor");
            }
            other => check(false, &format!("expected a refusal, got {other:?}")),
        }
        let written = users.exists(Get::new(row)).await?;
        check(!written, "nothing of the refused put is written");
    }

    println!("batch: eve age 41, fay age 151, gus age 0");
    let out = users
        .batch(vec![
            BatchOp::Put(age_put("eve", "41")),
            BatchOp::Put(age_put("fay", "151")),
            BatchOp::Put(age_put("gus", "0")),
        ])
        .await?;
    for (row, r) in ["eve", "fay", "gus"].iter().zip(&out) {
        println!(
            "    {row}: {}",
            r.as_ref()
                .map_or_else(|e| e.to_string(), |_| "written".into())
        );
    }
    check(
        out[0].is_ok() && matches!(out[1], Err(Error::Coprocessor { .. })) && out[2].is_ok(),
        "only the bad operation of the batch fails",
    );
    check(
        users.exists(Get::new("eve")).await? && !users.exists(Get::new("fay")).await?,
        "the batch's good puts are written, the bad one is not",
    );

    println!("check-and-mutate: set ada's age to 999 if she has a name");
    let r = users
        .check_and_mutate(
            CheckAndMutate::new("ada", "info", "name")
                .if_value(basalt::client::CompareOp::Equal, "ada")
                .then_put(Put::new("ada").add_column("info", "age", "999")),
        )
        .await;
    println!("    {r:?}");
    check(
        matches!(r, Err(Error::Coprocessor { .. })),
        "the rule also guards check-and-mutate",
    );
    let ada = users.get(Get::new("ada")).await?;
    check(
        ada.value("info", "age").map(|v| v.as_ref()) == Some(b"36".as_slice()),
        "ada keeps age 36",
    );

    let m = registry.metrics(&name);
    println!("metrics: {m:?}");
    conn.close().await?;
    Ok(failed)
}

#[tokio::main]
async fn main() -> ExitCode {
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("no temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(tmp.path()).await {
        Ok(failed) if failed.is_empty() => {
            println!("all checks passed");
            ExitCode::SUCCESS
        }
        Ok(failed) => {
            eprintln!("{} check(s) failed: {failed:?}", failed.len());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
