//! What a run saw: one HDR histogram per operation and overall, per-second buckets for the
//! latency-over-time plot, error counts by kind, and the server's own stage times.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Latencies are recorded in microseconds, 3 significant digits, up to an hour.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant, valid bounds")
}

/// One request's outcome, as the driver classifies it.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    Ok,
    /// An HTTP status that is not success.
    Status(u16),
    Timeout,
    Connection,
    /// Not sent: the open loop already had `--max-outstanding` requests waiting.
    NotSent,
}

impl Outcome {
    fn error_kind(self) -> Option<String> {
        match self {
            Outcome::Ok => None,
            Outcome::Status(s) => Some(format!("http_{s}")),
            Outcome::Timeout => Some("timeout".into()),
            Outcome::Connection => Some("connection".into()),
            Outcome::NotSent => Some("not_sent_client_saturated".into()),
        }
    }
}

#[derive(Debug)]
pub struct OpStats {
    pub latency: Histogram<u64>,
    pub errors: u64,
}

#[derive(Debug)]
pub struct Second {
    pub latency: Histogram<u64>,
    pub errors: u64,
    /// Resident memory of the server at the end of this second, when its pid is known.
    pub server_rss_bytes: Option<u64>,
}

#[derive(Debug)]
pub struct Recorder {
    pub start: Instant,
    pub all: Histogram<u64>,
    pub ops: BTreeMap<&'static str, OpStats>,
    pub errors: BTreeMap<String, u64>,
    pub timeline: Vec<Second>,
    /// Server-reported stage times (µs), from `Server-Timing`.
    pub stages: BTreeMap<String, Histogram<u64>>,
    pub cache_hits: u64,
    pub timed_searches: u64,
    pub episodes_completed: u64,
    pub episodes_failed: u64,
    /// When the last reply arrived.
    pub last_done: Instant,
}

impl Recorder {
    pub fn new(start: Instant) -> Recorder {
        Recorder {
            start,
            all: histogram(),
            ops: BTreeMap::new(),
            errors: BTreeMap::new(),
            timeline: Vec::new(),
            stages: BTreeMap::new(),
            cache_hits: 0,
            timed_searches: 0,
            episodes_completed: 0,
            episodes_failed: 0,
            last_done: start,
        }
    }

    /// One request of operation `op`, timed from `from` (its scheduled time in an open loop, so a
    /// stalled server is charged for the wait) to `done`. A request not sent counts as an error
    /// but has no latency.
    pub fn record(&mut self, op: &'static str, from: Instant, done: Instant, outcome: Outcome) {
        let micros = done.saturating_duration_since(from).as_micros().max(1) as u64;
        let sent = !matches!(outcome, Outcome::NotSent);
        let failed = outcome.error_kind();
        let stats = self.ops.entry(op).or_insert_with(|| OpStats {
            latency: histogram(),
            errors: 0,
        });
        stats.errors += u64::from(failed.is_some());
        if sent {
            stats.latency.saturating_record(micros);
            self.all.saturating_record(micros);
        }
        let second = self.timeline_at(done);
        if sent {
            second.latency.saturating_record(micros);
        }
        second.errors += u64::from(failed.is_some());
        if let Some(kind) = failed {
            *self.errors.entry(kind).or_default() += 1;
        }
        self.last_done = self.last_done.max(done);
    }

    /// The server's stage times for one search.
    pub fn record_stages(&mut self, stages: &[(String, f64)], cached: bool) {
        self.timed_searches += 1;
        self.cache_hits += u64::from(cached);
        for (name, ms) in stages {
            self.stages
                .entry(name.clone())
                .or_insert_with(histogram)
                .saturating_record((ms * 1000.0).round().max(1.0) as u64);
        }
    }

    pub fn record_server_rss(&mut self, at: Instant, bytes: u64) {
        self.timeline_at(at).server_rss_bytes = Some(bytes);
    }

    /// Requests sent (answered or not).
    pub fn requests(&self) -> u64 {
        self.all.len()
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    fn timeline_at(&mut self, at: Instant) -> &mut Second {
        let index = at.saturating_duration_since(self.start).as_secs() as usize;
        while self.timeline.len() <= index {
            self.timeline.push(Second {
                latency: histogram(),
                errors: 0,
                server_rss_bytes: None,
            });
        }
        &mut self.timeline[index]
    }

    /// Seconds from the start to the last reply.
    pub fn elapsed(&self) -> Duration {
        self.last_done.saturating_duration_since(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_latency_errors_and_seconds() {
        let start = Instant::now();
        let mut r = Recorder::new(start);
        r.record(
            "search",
            start,
            start + Duration::from_millis(5),
            Outcome::Ok,
        );
        r.record(
            "search",
            start + Duration::from_millis(1500),
            start + Duration::from_millis(1600),
            Outcome::Status(429),
        );
        r.record(
            "visit",
            start,
            start + Duration::from_millis(2),
            Outcome::Timeout,
        );
        assert_eq!(r.requests(), 3);
        assert_eq!(r.error_count(), 2);
        assert_eq!(r.errors.get("http_429"), Some(&1));
        assert_eq!(r.ops["search"].errors, 1);
        assert_eq!(r.timeline.len(), 2);
        assert_eq!(r.timeline[1].errors, 1);
        let p50 = r.ops["search"].latency.value_at_quantile(0.5);
        assert!((4_990..=5_010).contains(&p50), "{p50}");
        assert_eq!(r.elapsed(), Duration::from_millis(1600));
    }
}
