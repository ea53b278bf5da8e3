//! The hooks of the one-row operations that have a pre/post pair of their own: get, exists,
//! increment, append and check-and-mutate. Each is called the same way: when the table has
//! coprocessors, the engine is checked open and the table enabled, the pre-hook runs on the
//! row's region before the operation (it may change the operation, or answer it and bypass
//! it), and the post-hook runs after it (it may change the answer).
//!
//! Invariant: a table without coprocessors pays one atomic load ([`before`] returns
//! [`Before::Unhooked`] at once); a bypassed operation reads and writes nothing.

use crate::coprocessor::{Flow, HookEnv, RegionHooks};
use crate::error::Result;
use crate::ops::{Append, CheckAndMutate, Get, Increment, RowResult};
use crate::server::read::ReadPath;
use crate::server::shared::TableState;
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a hook call returns (the boxed future of an `async_trait` hook).
pub(crate) type HookFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// A one-row operation with a pre/post hook pair of its own.
pub(crate) trait RowHooked: Send {
    /// What the operation answers (a row, a flag).
    type Answer: Send;
    /// The row the hooks run on (its region is the hooks' region).
    fn row(&self) -> &Bytes;
    /// The answer a pre-hook fills in when it bypasses the operation.
    fn unanswered(&self) -> Self::Answer;
    /// The operation's pre-hook.
    fn pre<'a>(
        &'a mut self,
        hooks: &'a dyn RegionHooks,
        env: &'a HookEnv<'a>,
        answer: &'a mut Self::Answer,
    ) -> HookFuture<'a, Flow>;
    /// The operation's post-hook.
    fn post<'a>(
        &'a self,
        hooks: &'a dyn RegionHooks,
        env: &'a HookEnv<'a>,
        answer: &'a mut Self::Answer,
    ) -> HookFuture<'a, ()>;
}

/// `exists`, whose hooks are not the get's.
pub(crate) struct Exists(pub(crate) Get);

/// Where an operation stands after [`before`].
pub(crate) enum Before<'a, A> {
    /// The table has no coprocessor: run the operation alone.
    Unhooked,
    /// A pre-hook bypassed the operation with this answer.
    Answered(A),
    /// Run the operation, then [`After::run`].
    Hooked(After<'a>),
}

/// The post-hook still owed to an operation whose pre-hook let it run.
pub(crate) struct After<'a> {
    hooks: Arc<dyn RegionHooks>,
    env: HookEnv<'a>,
}

/// Runs `op`'s pre-hook on the region of its row when `t` has coprocessors.
pub(crate) async fn before<'a, O: RowHooked>(
    reads: &'a ReadPath,
    t: &'a TableState,
    op: &mut O,
) -> Result<Before<'a, O::Answer>> {
    let Some(hooks) = t.hooks() else {
        return Ok(Before::Unhooked);
    };
    reads.shared.check_open()?;
    t.check_enabled()?;
    let env = HookEnv::new(reads, &t.name, t.online_region(op.row())?);
    let mut answer = op.unanswered();
    if op.pre(&*hooks, &env, &mut answer).await? == Flow::Bypass {
        return Ok(Before::Answered(answer));
    }
    Ok(Before::Hooked(After { hooks, env }))
}

impl After<'_> {
    /// Runs `op`'s post-hook on `answer`.
    pub(crate) async fn run<O: RowHooked>(&self, op: &O, answer: &mut O::Answer) -> Result<()> {
        op.post(&*self.hooks, &self.env, answer).await
    }
}

/// Reads one row, running the table's get hooks when it has coprocessors.
pub(crate) async fn get(reads: &ReadPath, t: &TableState, mut g: Get) -> Result<RowResult> {
    let after = match before(reads, t, &mut g).await? {
        Before::Unhooked => return reads.get(t, &g),
        Before::Answered(row) => return Ok(row),
        Before::Hooked(after) => after,
    };
    let mut row = reads.get(t, &g)?;
    after.run(&g, &mut row).await?;
    Ok(row)
}

/// Answers `exists`, running the table's exists hooks (not the get hooks) when it has
/// coprocessors.
pub(crate) async fn exists(reads: &ReadPath, t: &TableState, g: Get) -> Result<bool> {
    let mut op = Exists(g);
    let after = match before(reads, t, &mut op).await? {
        Before::Unhooked => return Ok(!reads.get(t, &op.0)?.is_empty()),
        Before::Answered(found) => return Ok(found),
        Before::Hooked(after) => after,
    };
    let mut found = !reads.get(t, &op.0)?.is_empty();
    after.run(&op, &mut found).await?;
    Ok(found)
}

/// An empty answer for `row`.
fn no_cells(row: &Bytes) -> RowResult {
    RowResult {
        row: row.clone(),
        cells: Vec::new(),
    }
}

/// [`RowHooked`] for an operation whose hooks take it as it is: its type, its answer, the
/// empty answer of a bypass, and its hook pair.
macro_rules! row_hooked {
    ($op:ty, $answer:ty, $unanswered:expr, $pre:ident, $post:ident) => {
        impl RowHooked for $op {
            type Answer = $answer;
            fn row(&self) -> &Bytes {
                &self.row
            }
            fn unanswered(&self) -> $answer {
                $unanswered(&self.row)
            }
            fn pre<'a>(
                &'a mut self,
                hooks: &'a dyn RegionHooks,
                env: &'a HookEnv<'a>,
                answer: &'a mut $answer,
            ) -> HookFuture<'a, Flow> {
                hooks.$pre(env, self, answer)
            }
            fn post<'a>(
                &'a self,
                hooks: &'a dyn RegionHooks,
                env: &'a HookEnv<'a>,
                answer: &'a mut $answer,
            ) -> HookFuture<'a, ()> {
                hooks.$post(env, self, answer)
            }
        }
    };
}

row_hooked!(Get, RowResult, no_cells, pre_get, post_get);
row_hooked!(
    Increment,
    RowResult,
    no_cells,
    pre_increment,
    post_increment
);
row_hooked!(Append, RowResult, no_cells, pre_append, post_append);
row_hooked!(
    CheckAndMutate,
    bool,
    |_| false,
    pre_check_and_mutate,
    post_check_and_mutate
);

impl RowHooked for Exists {
    type Answer = bool;
    fn row(&self) -> &Bytes {
        &self.0.row
    }
    fn unanswered(&self) -> bool {
        false
    }
    fn pre<'a>(
        &'a mut self,
        hooks: &'a dyn RegionHooks,
        env: &'a HookEnv<'a>,
        answer: &'a mut bool,
    ) -> HookFuture<'a, Flow> {
        hooks.pre_exists(env, &mut self.0, answer)
    }
    fn post<'a>(
        &'a self,
        hooks: &'a dyn RegionHooks,
        env: &'a HookEnv<'a>,
        answer: &'a mut bool,
    ) -> HookFuture<'a, ()> {
        hooks.post_exists(env, &self.0, answer)
    }
}
