//! Long shell work (flushes and compactions, index builds, verifications and repairs) runs
//! as a task the shell waits for, so that Ctrl-C stops the wait without stopping the work
//! halfway.
//!
//! Invariant: an interrupted task either goes on to its end in the background (work that
//! writes: a compaction, an index build, a repair) or is dropped where dropping changes
//! nothing (a verification, which only reads). Tasks left in the background are kept
//! ([`Background`]) so that the shell waits for them before the engine closes: an index
//! build cut off by the close would leave the index BUILDING for good.

use super::ShellError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// The tasks a shell left running in the background. Cheap to clone; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Background {
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Background {
    fn keep<T: Send + 'static>(&self, task: JoinHandle<basalt_core::Result<T>>) {
        let done = tokio::spawn(async move {
            if let Ok(Err(e)) = task.await {
                eprintln!("background work failed: {e}");
            }
        });
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.retain(|t| !t.is_finished());
            tasks.push(done);
        }
    }

    /// Waits until every task left in the background has ended.
    pub async fn finish(&self) {
        let tasks: Vec<JoinHandle<()>> = match self.tasks.lock() {
            Ok(mut tasks) => tasks.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        if !tasks.is_empty() {
            eprintln!(
                "waiting for {} command(s) still running in the background",
                tasks.len()
            );
        }
        for t in tasks {
            let _ = t.await;
        }
    }
}

/// What the shell does with a task when Ctrl-C comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnInterrupt {
    /// The task goes on to its end; the shell stops waiting.
    Continue,
    /// The task is dropped (only for work that writes nothing).
    Abort,
}

/// How a wait ended.
pub(super) enum Waited<T> {
    /// The task ended with this.
    Done(T),
    /// Ctrl-C came first.
    Interrupted,
}

/// How often the flag is looked at while waiting.
const POLL: Duration = Duration::from_millis(50);

/// Waits for `task` until it ends or `stop` is raised.
pub(super) async fn wait<T: Send + 'static>(
    mut task: JoinHandle<basalt_core::Result<T>>,
    stop: &AtomicBool,
    on_interrupt: OnInterrupt,
    background: &Background,
) -> Result<Waited<T>, ShellError> {
    loop {
        // Looked at before the task is polled, so a raised flag always interrupts.
        if stop.load(Ordering::Relaxed) {
            match on_interrupt {
                OnInterrupt::Abort => task.abort(),
                OnInterrupt::Continue => background.keep(task),
            }
            return Ok(Waited::Interrupted);
        }
        tokio::select! {
            ended = &mut task => {
                return match ended {
                    Ok(result) => Ok(Waited::Done(result?)),
                    Err(e) => Err(ShellError::Unsupported(format!("the task failed: {e}"))),
                };
            }
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}
