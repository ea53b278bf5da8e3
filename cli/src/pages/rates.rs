//! Requests per second from counters that only grow (a server's RPC requests), sampled
//! now and then: the rate is the growth between the two newest samples at least
//! [`RATE_WINDOW`] apart, as HBase's master shows each region server's "Requests Per
//! Second" from the load reports it receives.
//!
//! Invariants: a rate is never negative: a counter that went down (its server restarted)
//! starts a new series with no rate until its next sample; a sample closer than
//! [`RATE_WINDOW`] to the last one counted changes nothing, so frequent page loads do not
//! make the rate jumpy; keys not sampled any more are forgotten ([`Rates::retain`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shortest time between two samples a rate is computed from.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);

/// One series' newest counted sample and the rate up to it.
#[derive(Debug, Clone, Copy)]
struct Series {
    at: Instant,
    count: u64,
    per_sec: Option<f64>,
}

/// Rates of several named counters (see the module doc).
#[derive(Debug, Default)]
pub struct Rates {
    series: Mutex<HashMap<String, Series>>,
}

impl Rates {
    /// Records that `key`'s counter read `count` at `at`; returns its rate per second now
    /// (`None` until two samples [`RATE_WINDOW`] apart were seen).
    pub fn observe(&self, key: &str, count: u64, at: Instant) -> Option<f64> {
        let Ok(mut series) = self.series.lock() else {
            return None;
        };
        let fresh = Series {
            at,
            count,
            per_sec: None,
        };
        let Some(last) = series.get(key).copied() else {
            series.insert(key.to_string(), fresh);
            return None;
        };
        if count < last.count {
            series.insert(key.to_string(), fresh);
            return None;
        }
        let elapsed = at.saturating_duration_since(last.at);
        if elapsed < RATE_WINDOW {
            return last.per_sec;
        }
        let per_sec = (count - last.count) as f64 / elapsed.as_secs_f64();
        series.insert(
            key.to_string(),
            Series {
                at,
                count,
                per_sec: Some(per_sec),
            },
        );
        Some(per_sec)
    }

    /// Forgets every series whose key `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut series) = self.series.lock() {
            series.retain(|k, _| keep(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_growth_over_the_window() {
        let rates = Rates::default();
        let t0 = Instant::now();
        assert_eq!(rates.observe("a", 10, t0), None);
        // Too soon: nothing counted yet.
        assert_eq!(
            rates.observe("a", 15, t0 + Duration::from_millis(200)),
            None
        );
        assert_eq!(
            rates.observe("a", 30, t0 + Duration::from_secs(2)),
            Some(10.0)
        );
        // Within the window of the last counted sample: the last rate stands.
        assert_eq!(
            rates.observe("a", 1000, t0 + Duration::from_millis(2500)),
            Some(10.0)
        );
        assert_eq!(
            rates.observe("a", 30, t0 + Duration::from_secs(4)),
            Some(0.0)
        );
    }

    #[test]
    fn a_counter_that_went_down_starts_again() {
        let rates = Rates::default();
        let t0 = Instant::now();
        rates.observe("a", 100, t0);
        assert_eq!(rates.observe("a", 5, t0 + Duration::from_secs(2)), None);
        assert_eq!(
            rates.observe("a", 9, t0 + Duration::from_secs(4)),
            Some(2.0)
        );
    }

    #[test]
    fn series_are_separate_and_forgotten() {
        let rates = Rates::default();
        let t0 = Instant::now();
        rates.observe("a", 0, t0);
        rates.observe("b", 0, t0);
        assert_eq!(
            rates.observe("a", 4, t0 + Duration::from_secs(1)),
            Some(4.0)
        );
        rates.retain(|k| k == "b");
        // "a" forgotten: a new series; "b" kept: its rate since its first sample.
        assert_eq!(rates.observe("a", 8, t0 + Duration::from_secs(3)), None);
        assert_eq!(
            rates.observe("b", 6, t0 + Duration::from_secs(3)),
            Some(2.0)
        );
    }
}
