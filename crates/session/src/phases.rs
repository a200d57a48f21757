//! Where an installation's time goes: named phases with their wall-clock time, summed over
//! every time a phase ran (`bench/splice_time.py` prints them, `kerf count --json` reports
//! them as `splice_phases_us`).

use std::time::{Duration, Instant};

/// Time per named phase, in the order the phases first ran.
#[derive(Clone, Debug, Default)]
pub struct Phases(Vec<(&'static str, Duration)>);

impl Phases {
    /// Add `d` to phase `name`.
    pub fn add(&mut self, name: &'static str, d: Duration) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += d,
            None => self.0.push((name, d)),
        }
    }

    /// Add the time since `since` to phase `name`, and return now (the next phase's start).
    pub fn lap(&mut self, name: &'static str, since: Instant) -> Instant {
        let now = Instant::now();
        self.add(name, now - since);
        now
    }

    /// Every phase with its total, in the order they first ran.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, Duration)> + '_ {
        self.0.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_per_phase_in_first_run_order() {
        let mut p = Phases::default();
        p.add("plan", Duration::from_micros(5));
        p.add("write", Duration::from_micros(2));
        p.add("plan", Duration::from_micros(1));
        let v: Vec<_> = p.iter().collect();
        assert_eq!(v, [("plan", Duration::from_micros(6)), ("write", Duration::from_micros(2))]);
    }
}
