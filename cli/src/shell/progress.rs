//! Progress bars for long shell work (counting, index builds and checks, compactions), drawn
//! on standard error and only when it is a terminal, so scripts and transcripts never see
//! them.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner counting items of unknown total (`what` names them).
pub fn counter(what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}: {human_pos} ({per_sec})") {
        bar.set_style(style);
    }
    bar.set_message(what.to_string());
    bar
}

/// A bar of `total` items (`what` names the work).
pub fn bar(what: &str, total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:40}] {human_pos}/{human_len} ({eta} left)")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}
