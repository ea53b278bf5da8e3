//! Batches: many operations in one call, one outcome per operation.

use super::{Append, CheckAndMutate, Delete, Get, Increment, Put, RowMutations, RowResult};
use serde::{Deserialize, Serialize};

/// One operation of a batch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum BatchOp {
    /// A put.
    Put(Put),
    /// A delete.
    Delete(Delete),
    /// A get.
    Get(Get),
    /// An increment.
    Increment(Increment),
    /// An append.
    Append(Append),
    /// Row mutations.
    RowMutations(RowMutations),
    /// A check-and-mutate.
    CheckAndMutate(CheckAndMutate),
}

/// The outcome of one batch operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchOutcome {
    /// A mutation was applied.
    Done,
    /// A read, increment or append result.
    Row(RowResult),
    /// A check-and-mutate: whether the condition held and the mutation applied.
    Checked(bool),
}
