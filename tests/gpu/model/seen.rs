//! Outcomes a run saw, so a long run shows it exercised what it claims.

use super::collective::Went;
use super::launches::Applied;

#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    pub bytes_read: u64,
    pub untrusted_reads: u64,
    pub untrusted_checks: u64,
    /// Checks of a buffer whose verdict was still to come, answered
    /// trusted / untrusted.
    pub early_checks: [u64; 2],
    pub failing_launches: u64,
    pub refused_launches: u64,
    pub late_launches: u64,
    /// Launches that read bytes at risk: their writes at risk too.
    pub propagated: u64,
    /// Reads made first so an outcome would not depend on timing.
    pub settles: u64,
    pub syncs_reporting: u64,
    pub collectives_run: u64,
    pub collectives_poisoned: u64,
    pub collectives_failed: u64,
    /// Calls refused on their rank.
    pub calls_refused: u64,
    pub overlaps: u64,
    pub sync_collectives_reporting: u64,
}

impl Seen {
    pub fn applied(&mut self, a: Applied) {
        match a {
            Applied::Wrote | Applied::Ran => {}
            Applied::Failed => self.failing_launches += 1,
            Applied::Refused => self.refused_launches += 1,
            Applied::Late => self.late_launches += 1,
            Applied::Propagated => self.propagated += 1,
        }
    }

    pub fn went(&mut self, w: Went) {
        match w {
            Went::Ran => self.collectives_run += 1,
            Went::Poisoned => self.collectives_poisoned += 1,
            Went::Failed => self.collectives_failed += 1,
        }
    }
}

impl std::ops::AddAssign for Seen {
    fn add_assign(&mut self, o: Seen) {
        self.bytes_read += o.bytes_read;
        self.untrusted_reads += o.untrusted_reads;
        self.untrusted_checks += o.untrusted_checks;
        self.early_checks[0] += o.early_checks[0];
        self.early_checks[1] += o.early_checks[1];
        self.failing_launches += o.failing_launches;
        self.refused_launches += o.refused_launches;
        self.late_launches += o.late_launches;
        self.propagated += o.propagated;
        self.settles += o.settles;
        self.syncs_reporting += o.syncs_reporting;
        self.collectives_run += o.collectives_run;
        self.collectives_poisoned += o.collectives_poisoned;
        self.collectives_failed += o.collectives_failed;
        self.calls_refused += o.calls_refused;
        self.overlaps += o.overlaps;
        self.sync_collectives_reporting += o.sync_collectives_reporting;
    }
}
