//! Long work in the tool's commands: progress bars on standard error ([`bytes_bar`],
//! [`spinner`]) and a Ctrl-C flag ([`Interrupt`]) that work loops read between steps.
//!
//! Invariants: a bar draws only when standard error is a terminal (piped or redirected
//! output never holds bar frames); an [`Interrupt`] never stops work by itself, it only
//! raises a flag the work reads at its own safe points (between two batches of an import),
//! so everything written before the flag was seen stays written. A second Ctrl-C ends the
//! process at once (exit code 130): the writes acknowledged so far are in the WAL.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where bars draw: standard error when it is a terminal, nowhere otherwise.
fn target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A bar over `total` bytes of input, labelled `what` (hidden when standard error is not a
/// terminal).
pub fn bytes_bar(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), target());
    // A template the code fixes: parsing it cannot fail, but fall back to the default.
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left) {prefix}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

/// A spinner with the elapsed time for work whose length is unknown (an offline check),
/// labelled `what` (hidden when standard error is not a terminal).
pub fn spinner(what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, target());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A spinner counting items of unknown total, labelled `what` (hidden when standard error
/// is not a terminal).
pub fn counter(what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, target());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}: {human_pos} ({per_sec})") {
        bar.set_style(style);
    }
    bar.set_message(what.to_string());
    bar
}

/// A bar over `total` items, labelled `what` (hidden when standard error is not a
/// terminal).
pub fn items_bar(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), target());
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:40}] {human_pos}/{human_len} ({eta} left)")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

/// A flag raised by Ctrl-C (or by [`Interrupt::raise`]) that long work reads between steps.
/// Cheap to clone; clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    raised: Arc<AtomicBool>,
}

impl Interrupt {
    /// A flag nothing raises but [`Interrupt::raise`] (tests, library callers).
    pub fn new() -> Self {
        Self::default()
    }

    /// A flag raised by Ctrl-C: each Ctrl-C raises it (printing what stops), and one that
    /// comes while it is still raised (the work has not reached a safe point, or nobody
    /// lowered it since) exits the process with code 130. Must be called inside a tokio
    /// runtime.
    pub fn on_ctrl_c(what_stops: &'static str) -> Self {
        let flag = Self::new();
        let raised = flag.raised.clone();
        tokio::spawn(async move {
            // An error: no signal handling here, so Ctrl-C keeps its default action.
            while tokio::signal::ctrl_c().await.is_ok() {
                if raised.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "\ninterrupted twice: exiting now (the WAL keeps every acknowledged write)"
                    );
                    std::process::exit(130);
                }
                eprintln!("\ninterrupted: {what_stops} (Ctrl-C again to quit at once)");
            }
        });
        flag
    }

    /// The shared flag itself (the shell reads and lowers it between commands).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.raised.clone()
    }

    /// Raises the flag.
    pub fn raise(&self) {
        self.raised.store(true, Ordering::SeqCst);
    }

    /// True once the flag was raised.
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let a = Interrupt::new();
        let b = a.clone();
        assert!(!b.is_raised());
        a.raise();
        assert!(b.is_raised());
    }

    #[test]
    fn bars_keep_their_length_and_position() {
        let bar = bytes_bar(100, "importing");
        bar.inc(40);
        assert_eq!((bar.length(), bar.position()), (Some(100), 40));
        bar.finish_and_clear();
    }
}
