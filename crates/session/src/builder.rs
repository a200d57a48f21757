//! The splice and removal steps of the patch-set builder (`installer`, DESIGN.md §9.0 steps 8
//! and removal): a patch set's splices go through a [`Backend`] in batches, in the order they
//! must go live (the caller's plan order: timer stops before timer starts), each splice's
//! [`Outcome`] handed to the builder as soon as its batch returns, and splices a thread is
//! inside (`Later`) tried again in a later batch. What a process needs around it (signal-mask
//! guards, the trap dispatcher) is the back-end's hooks; what the kernel does inside a batch
//! (int3s, quiescence, jumps) is its `Backend::splice`.

pub(crate) use crate::backend::Batches;
use crate::backend::{Backend, Outcome, Splice};
use crate::plan::SitePlan;
use crate::probe::{InstrumentError, Probe, Reason, Refused};

/// Every probe of the site `sp` left out, with why (one record each, as both targets report
/// them).
pub(crate) fn refusals<'a>(
    probes: &'a [Probe],
    sp: &'a SitePlan,
    reason: &'a Reason,
) -> impl Iterator<Item = Refused> + 'a {
    let addr = sp.plan.displaced.point;
    sp.members.iter().map(move |&i| Refused {
        probe: i,
        label: probes[i].point.label.clone(),
        addr,
        reason: reason.clone(),
    })
}

/// Splice `todo` (indexes into `splices`, in the order they must go live) through `be`,
/// `batches.size` at a time. Before each batch `before` runs (a cancellation check); after
/// it, every outcome but `Later` goes to `settled` with its splice's index, also when the
/// batch then fails (what went in before an error must be known, to come out again: DESIGN.md
/// §5). `Later` splices go to the end of the queue and are tried again after a pause, for at
/// most `batches.tries` rounds; `settled` never sees `Later`. Returns the splices still
/// `Later` at the end.
pub(crate) fn splice_in_batches<B: Backend + ?Sized>(
    be: &mut B,
    splices: &[Splice<B::Addr>],
    mut todo: Vec<usize>,
    batches: Batches,
    mut before: impl FnMut() -> Result<(), InstrumentError>,
    mut settled: impl FnMut(usize, Outcome),
) -> Result<Vec<usize>, InstrumentError> {
    let mut tries = 0;
    while !todo.is_empty() && tries < batches.tries {
        before()?;
        let batch: Vec<usize> = todo.drain(..todo.len().min(batches.size)).collect();
        let these: Vec<Splice<B::Addr>> = batch.iter().map(|&i| splices[i].clone()).collect();
        let mut done = Vec::with_capacity(batch.len());
        let r = be.splice(&these, &mut done);
        // Whatever went in is reported before any error is returned: it must come out.
        let mut later = Vec::new();
        for (&i, o) in batch.iter().zip(done) {
            match o {
                Outcome::Later => later.push(i),
                o => settled(i, o),
            }
        }
        r?;
        if !later.is_empty() {
            tries += 1;
            todo.extend(later);
            std::thread::sleep(batches.pause);
        }
    }
    Ok(todo)
}

/// Take live splices out through `be` in the reverse of the order they went live (`live`:
/// `(index, splice)` in that order): timer starts before stops, a process's signal-mask
/// guards after every trap. `batches.size` per call of [`Backend::remove`], which restores
/// and verifies every byte; `removed` hears each index once its batch is out. The first error
/// stops the removal (the splices not yet out stay live, for the caller to say so or retry).
pub(crate) fn remove_in_batches<B: Backend + ?Sized>(
    be: &mut B,
    live: &[(usize, Splice<B::Addr>)],
    size: usize,
    mut removed: impl FnMut(usize),
) -> Result<(), InstrumentError> {
    let order: Vec<&(usize, Splice<B::Addr>)> = live.iter().rev().collect();
    let mut r = Ok(());
    for batch in order.chunks(size.max(1)) {
        let splices: Vec<Splice<B::Addr>> = batch.iter().map(|(_, s)| s.clone()).collect();
        if let Err(e) = be.remove(&splices) {
            r = Err(e);
            break;
        }
        for (i, _) in batch {
            removed(*i);
        }
    }
    be.removals_done();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::installer::fake::Fake;
    use kerf_arch::RemoteAddr;
    use std::time::Duration;

    fn splices(n: u64) -> Vec<Splice<RemoteAddr>> {
        let at = RemoteAddr;
        (0..n)
            .map(|a| Splice {
                addr: at(a),
                old: vec![0],
                new: vec![1],
                patch: at(0),
                springboard: None,
            })
            .collect()
    }

    const TWO: Batches = Batches { size: 2, tries: 3, pause: Duration::ZERO };

    /// In the order given, `size` at a time; a `Later` splice goes to the back of the queue.
    #[test]
    fn batches_in_order_and_later_retried() {
        let mut be = Fake { busy: vec![(1, 1)], refuse: Some(3), ..Fake::default() };
        let mut settled = Vec::new();
        let left = splice_in_batches(
            &mut be,
            &splices(5),
            vec![4, 1, 0, 3, 2],
            TWO,
            || Ok(()),
            |i, o| settled.push((i, o)),
        )
        .unwrap();
        assert!(left.is_empty());
        assert_eq!(be.log().spliced, vec![vec![4, 1], vec![0, 3], vec![2, 1]]);
        let refused = Outcome::Refused(Reason::Busy { tries: 0 });
        assert_eq!(
            settled,
            vec![
                (4, Outcome::Done),
                (0, Outcome::Done),
                (3, refused),
                (2, Outcome::Done),
                (1, Outcome::Done)
            ]
        );
    }

    /// After `tries` rounds with a splice still in some thread's way, it is returned.
    #[test]
    fn still_later_after_every_try_is_returned() {
        let mut be = Fake { busy: vec![(0, 100)], ..Fake::default() };
        let mut settled = Vec::new();
        let left = splice_in_batches(
            &mut be,
            &splices(2),
            vec![0, 1],
            TWO,
            || Ok(()),
            |i, _| settled.push(i),
        )
        .unwrap();
        assert_eq!(left, vec![0]);
        assert_eq!(settled, vec![1]);
        assert_eq!(be.log().spliced.len(), 3);
    }

    /// What went in before a batch failed is reported before the error comes back (it must
    /// come out again); nothing after it is tried.
    #[test]
    fn what_went_in_before_an_error_is_settled() {
        let mut be = Fake { fail_at: Some(2), ..Fake::default() };
        let mut settled = Vec::new();
        let all = Batches { size: 4, ..TWO };
        let r = splice_in_batches(
            &mut be,
            &splices(4),
            vec![0, 1, 2, 3],
            all,
            || Ok(()),
            |i, _| settled.push(i),
        );
        assert!(matches!(r, Err(InstrumentError::Interrupted)));
        assert_eq!(settled, vec![0, 1]);
    }

    /// The check before each batch stops the splicing before that batch.
    #[test]
    fn a_cancelled_batch_is_not_spliced() {
        let mut be = Fake::default();
        let mut calls = 0;
        let r = splice_in_batches(
            &mut be,
            &splices(4),
            vec![0, 1, 2, 3],
            TWO,
            || {
                calls += 1;
                if calls == 2 {
                    Err(InstrumentError::Interrupted)
                } else {
                    Ok(())
                }
            },
            |_, _| {},
        );
        assert!(matches!(r, Err(InstrumentError::Interrupted)));
        assert_eq!(be.log().spliced, vec![vec![0, 1]]);
    }

    /// Removal goes in the reverse of the live order, a batch at a time, and stops at the
    /// first error with the rest still live.
    #[test]
    fn removal_in_reverse_stops_at_an_error() {
        let live: Vec<(usize, Splice<RemoteAddr>)> = splices(5).into_iter().enumerate().collect();
        let mut be = Fake::default();
        let mut out = Vec::new();
        remove_in_batches(&mut be, &live, 2, |i| out.push(i)).unwrap();
        assert_eq!(be.log().removed, vec![vec![4, 3], vec![2, 1], vec![0]]);
        assert_eq!(out, vec![4, 3, 2, 1, 0]);

        let mut be = Fake { fail_at: Some(2), ..Fake::default() };
        let mut out = Vec::new();
        let r = remove_in_batches(&mut be, &live, 2, |i| out.push(i));
        assert!(matches!(r, Err(InstrumentError::Interrupted)));
        assert_eq!(out, vec![4, 3]);
    }
}
