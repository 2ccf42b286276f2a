//! Whether a block answered wrong is fetched again, and after what pause,
//! or the run stops: a transient wrong answer (a load-balanced provider
//! with a bad replica, a node catching up) is told apart from a persistent
//! one (the node serves the block that way).
//!
//! Each wrong answer of one block is handed to a [`Refetch`] as its text
//! (the rejection with its causes: the block, the field and both values).
//! It is fetched again after a pause that starts at [`FIRST_PAUSE`] and
//! doubles up to [`MAX_PAUSE`], as long as the answers differ, within
//! `index.refetch_budget_ms` from the first wrong answer. The same answer
//! [`SAME_ANSWER_LIMIT`] times in a row, or the budget spent, stops.
//!
//! This module only decides: it fetches nothing, sleeps nowhere and reads
//! no clock (the caller passes the time), so every rule is tested without
//! a node; `range` acts on what it answers.

use std::time::Duration;

use tokio::time::Instant;

/// The same wrong answer this many times in a row (the first one
/// included) is the node's answer, not a transient one: the run stops.
pub(crate) const SAME_ANSWER_LIMIT: u32 = 6;

/// The pause before the first fetch again.
pub(crate) const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// The longest pause between two fetches of one block.
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(10);

/// The wrong answers of one block so far.
#[derive(Debug)]
pub(crate) struct Refetch {
    budget: Duration,
    /// When the first wrong answer came.
    first: Option<Instant>,
    /// Fetches again decided so far.
    refetches: u32,
    /// The last wrong answer, and how many times in a row it came.
    last: Option<String>,
    in_a_row: u32,
}

/// What to do after a wrong answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// It differs from the block's previous wrong answer (the first one
    /// does).
    pub(crate) distinct: bool,
    pub(crate) next: Next,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Fetch the block again after this pause; it is fetch number `refetch`.
    Again { after: Duration, refetch: u32 },
    /// The same answer [`SAME_ANSWER_LIMIT`] times in a row.
    Persistent { refetches: u32 },
    /// The next fetch would start after the budget.
    Spent { refetches: u32, elapsed: Duration },
}

impl Refetch {
    /// No wrong answer yet; fetches again for up to `budget`.
    pub(crate) fn new(budget: Duration) -> Refetch {
        Refetch {
            budget,
            first: None,
            refetches: 0,
            last: None,
            in_a_row: 0,
        }
    }

    /// The pause before fetch number `refetch` (from 1).
    pub(crate) fn pause(refetch: u32) -> Duration {
        let doublings = refetch.saturating_sub(1).min(16);
        FIRST_PAUSE.saturating_mul(1 << doublings).min(MAX_PAUSE)
    }

    /// The block answered `answer` (a rejection's text, causes included)
    /// at `now`: fetch it again, or stop.
    pub(crate) fn wrong(&mut self, answer: String, now: Instant) -> Decision {
        let first = *self.first.get_or_insert(now);
        let distinct = self.last.as_ref() != Some(&answer);
        if distinct {
            self.last = Some(answer);
            self.in_a_row = 1;
        } else {
            self.in_a_row += 1;
        }
        let refetches = self.refetches;
        let next = if self.in_a_row >= SAME_ANSWER_LIMIT {
            Next::Persistent { refetches }
        } else {
            let after = Refetch::pause(refetches + 1);
            let elapsed = now.saturating_duration_since(first);
            if elapsed + after > self.budget {
                Next::Spent { refetches, elapsed }
            } else {
                self.refetches += 1;
                Next::Again {
                    after,
                    refetch: self.refetches,
                }
            }
        };
        Decision { distinct, next }
    }

    /// Why the run stops on block `n`, for `next` (a stop); the rejection
    /// itself is the error's cause.
    pub(crate) fn stop_reason(&self, n: u64, next: &Next) -> String {
        match next {
            Next::Persistent { refetches } => format!(
                "block {n}: the same wrong answer {SAME_ANSWER_LIMIT} times in a row (fetched again {refetches} times): the node serves it that way"
            ),
            Next::Spent { refetches, elapsed } => format!(
                "block {n}: still wrong after fetching it {refetches} more times over {:.1}s (index.refetch_budget_ms = {})",
                elapsed.as_secs_f64(),
                self.budget.as_millis()
            ),
            Next::Again { .. } => format!("block {n}: fetched again"),
        }
    }
}

/// A rejection's text with its causes, as it is compared: two answers are
/// the same when they name the same field with the same values.
pub(crate) fn answer_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn again(d: &Decision) -> Option<(Duration, u32)> {
        match d.next {
            Next::Again { after, refetch } => Some((after, refetch)),
            _ => None,
        }
    }

    #[test]
    fn pauses_double_from_250_ms_to_10_s() {
        let pauses: Vec<u64> = (1..=9)
            .map(|k| Refetch::pause(k).as_millis() as u64)
            .collect();
        assert_eq!(
            pauses,
            [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000]
        );
        assert_eq!(Refetch::pause(u32::MAX), MAX_PAUSE);
    }

    #[test]
    fn answers_that_differ_are_fetched_again_with_backoff() {
        let mut r = Refetch::new(5 * MIN);
        let mut now = Instant::now();
        for k in 1..=20u32 {
            let d = r.wrong(format!("block 7: hash does not verify: {k}"), now);
            assert!(d.distinct);
            let (after, refetch) = again(&d).unwrap_or_else(|| panic!("{k}: {d:?}"));
            assert_eq!((after, refetch), (Refetch::pause(k), k));
            now += after;
        }
    }

    #[test]
    fn the_same_answer_six_times_in_a_row_stops() {
        let mut r = Refetch::new(5 * MIN);
        let now = Instant::now();
        let d = r.wrong("A".into(), now);
        assert!(d.distinct && again(&d).is_some());
        for _ in 2..SAME_ANSWER_LIMIT {
            let d = r.wrong("A".into(), now);
            assert!(!d.distinct && again(&d).is_some());
        }
        let d = r.wrong("A".into(), now);
        assert_eq!(
            d,
            Decision {
                distinct: false,
                next: Next::Persistent { refetches: 5 }
            }
        );
        let why = r.stop_reason(7, &d.next);
        assert!(
            why.starts_with(
                "block 7: the same wrong answer 6 times in a row (fetched again 5 times)"
            ),
            "{why}"
        );
    }

    #[test]
    fn a_repeat_broken_by_another_answer_starts_the_count_again() {
        let mut r = Refetch::new(5 * MIN);
        let now = Instant::now();
        // Five A, one B, five A again: never six alike in a row.
        let answers = ["A"; 5].into_iter().chain(["B"]).chain(["A"; 5]);
        for answer in answers {
            let d = r.wrong(answer.into(), now);
            assert!(again(&d).is_some(), "{answer}: {d:?}");
        }
        let d = r.wrong("A".into(), now);
        assert_eq!(d.next, Next::Persistent { refetches: 11 });
    }

    #[test]
    fn no_fetch_starts_after_the_budget() {
        // 250 + 500 + 1000 + 2000 ms of pauses fit in 4 s; the next (4 s) not.
        let mut r = Refetch::new(Duration::from_secs(4));
        let start = Instant::now();
        let mut now = start;
        for k in 1..=4u32 {
            let d = r.wrong(format!("{k}"), now);
            let (after, _) = again(&d).unwrap_or_else(|| panic!("{k}: {d:?}"));
            now += after + Duration::from_millis(10); // the fetch itself
        }
        let d = r.wrong("5".into(), now);
        assert_eq!(
            d.next,
            Next::Spent {
                refetches: 4,
                elapsed: now - start
            }
        );
        let why = r.stop_reason(9, &d.next);
        assert_eq!(
            why,
            "block 9: still wrong after fetching it 4 more times over 3.8s (index.refetch_budget_ms = 4000)"
        );
    }

    #[test]
    fn a_zero_budget_stops_at_the_first_wrong_answer() {
        let mut r = Refetch::new(Duration::ZERO);
        let d = r.wrong("A".into(), Instant::now());
        assert!(matches!(d.next, Next::Spent { refetches: 0, .. }), "{d:?}");
    }

    #[test]
    fn an_answer_is_its_text_with_its_causes() {
        #[derive(Debug, thiserror::Error)]
        #[error("block 3 tx 0: malformed receipt from the node")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("bad status 0x7"));
        assert_eq!(
            answer_text(&e),
            "block 3 tx 0: malformed receipt from the node: bad status 0x7"
        );
    }
}
