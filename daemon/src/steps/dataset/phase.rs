//! The dataset's phases as a state machine: what the journal says ([`Phase`], decoded from
//! [`DatasetState`] here and nowhere else), what the plan asks ([`Goal`]), what the server
//! and the disk show ([`Observed`]), and the one pure [`next`] that decides the next
//! [`Action`]. No I/O here: the dataset step (`super`) observes, asks [`next`] and executes
//! one action at a time, each journaled, until the answer is [`Action::Nothing`] (its
//! `check` is the same question asked once). The sweep asks the same machine before each
//! point ([`Moment::Point`]) and after its last one ([`Moment::SweepOver`]).
//!
//! ```text
//!  Restoring{id} ──RedoRestore──▶ Settled (or, the snapshot corrupt, Settled with nothing made)
//!  Loading(load) ──RestoreSettings──▶ Settled
//!  Settled, not made ──RestoreLocal | RestoreFromStore | CreateAndLoad | PrepareTpcc──▶ Settled
//!  Settled, made ──TakeSnapshot──▶ snapshot Taken ──Upload──▶ Stored ──▶ Nothing
//!  before a point: Settled, made ──PutBack (the policy or the checksum variant asks)──▶ StartPoint
//! ```

use crate::journal::DatasetState;
use crate::plan::{Checksums, RestorePolicy};
use crate::sweep::SweepPoint;

/// Load settings in force: a load that was interrupted left them, the plan's come back first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Load {
    /// The parallel loader's (its degree).
    Parallel { degree: u32 },
    /// A sysbench-tpcc prepare's (its database).
    Tpcc { database: String },
}

/// Where the dataset's local snapshot is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SnapshotPhase {
    /// None taken (or the one taken was found corrupt and dropped).
    #[allow(dead_code)] // never constructed: the pub enum hid it from the lint
    None,
    /// Taken locally, not in any store.
    Taken { id: String },
    /// Taken; an upload was started and is resumed from its journaled parts.
    Uploading { id: String },
    /// Taken and uploaded to (and read back from) `store`.
    Stored { id: String, store: String },
}

impl SnapshotPhase {
    pub(crate) fn id(&self) -> Option<&str> {
        match self {
            SnapshotPhase::None => None,
            SnapshotPhase::Taken { id }
            | SnapshotPhase::Uploading { id }
            | SnapshotPhase::Stored { id, .. } => Some(id),
        }
    }
}

/// The workload whose points ran on the data since it was made or restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChangedBy {
    pub(crate) workload: String,
    /// The last of them was a warm-up.
    pub(crate) warmup: bool,
}

/// Nothing in flight: what the journal records as made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Settled {
    /// pgbench's dataset spec, once `pgbench -i` (or the parallel loader) finished or a
    /// snapshot was restored (cleared when a load starts: an interrupted `pgbench -i` leaves
    /// None, and the pending step in the journal).
    pub(crate) pgbench: Option<String>,
    /// The sysbench-tpcc datasets prepared (their specs).
    pub(crate) tpcc: Vec<String>,
    pub(crate) snapshot: Option<SnapshotPhase>,
    pub(crate) changed_by: Option<ChangedBy>,
}

/// What the journal says about the dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A restore of this local snapshot was journaled and did not finish: the data
    /// directory may be half of each.
    Restoring { snapshot: String },
    /// A load was interrupted with its load settings in force.
    Loading(Load),
    /// Nothing in flight (possibly nothing made yet).
    Settled(Settled),
}

impl Phase {
    /// The one decoding of the journal's dataset state. What is in flight comes first, in
    /// the order it is recovered: a restore (the data directory itself), then a
    /// sysbench-tpcc prepare's settings, then the parallel loader's; each recovery clears
    /// its field, so the next decoding shows what is left.
    pub(crate) fn of(st: &DatasetState) -> Phase {
        if let Some(id) = &st.restoring {
            return Phase::Restoring {
                snapshot: id.clone(),
            };
        }
        if let Some(db) = &st.tpcc_preparing {
            return Phase::Loading(Load::Tpcc {
                database: db.clone(),
            });
        }
        if let Some(degree) = st.load_degree {
            return Phase::Loading(Load::Parallel { degree });
        }
        let snapshot = st.snapshot.as_ref().map(|id| {
            let id = id.clone();
            match (&st.snapshot_stored, &st.snapshot_upload) {
                (Some(store), _) => SnapshotPhase::Stored {
                    id,
                    store: store.clone(),
                },
                (None, Some(_)) => SnapshotPhase::Uploading { id },
                (None, None) => SnapshotPhase::Taken { id },
            }
        });
        Phase::Settled(Settled {
            pgbench: st.spec.clone(),
            tpcc: st.tpcc.clone(),
            snapshot,
            changed_by: st.changed_by.as_ref().map(|w| ChangedBy {
                workload: w.clone(),
                warmup: st.changed_by_warmup,
            }),
        })
    }
}

/// When the machine is asked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Moment {
    /// The dataset step: every dataset made, the snapshot taken and stored.
    Step,
    /// Before a sweep point: the data as the point needs it, then the point starts.
    Point(SweepPoint),
    /// After the sweep's last point: no restore is to come.
    SweepOver,
}

/// What the plan asks of the dataset.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Goal {
    /// pgbench's dataset spec (None: no workload runs pgbench).
    pub(crate) pgbench: Option<String>,
    /// Each sysbench-tpcc dataset's spec.
    pub(crate) tpcc: Vec<String>,
    /// `[dataset]` keeps a local snapshot.
    pub(crate) keep_snapshot: bool,
    /// The store the snapshot is shared through.
    pub(crate) store: Option<String>,
    pub(crate) restore: RestorePolicy,
    pub(crate) moment: Moment,
}

impl Goal {
    /// A snapshot with the dataset's key may stand in for generating it.
    pub(crate) fn snapshots(&self) -> bool {
        self.keep_snapshot || self.store.is_some()
    }
}

/// What this start has already tried (and what it found), so an action that cannot
/// succeed now is not repeated: the next start tries again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tried {
    /// A restore from the store (the store lacks the snapshot, or it could not be read).
    pub(crate) store: bool,
    /// The snapshot's upload (it failed: the run goes on without it).
    pub(crate) upload: bool,
    /// The snapshot was taken by this drive (before a point: only then is it uploaded).
    pub(crate) took_snapshot: bool,
    /// The data directory put back before this point (once per point).
    pub(crate) put_back: bool,
}

/// What the server and the disk show, read by the dataset step before each decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Observed {
    /// pgbench_branches holds the planned scale's rows (read when the journal records
    /// pgbench's dataset as made; false otherwise).
    pub(crate) pgbench_present: bool,
    /// The sysbench-tpcc datasets (specs) recorded as made whose tables are not there at
    /// their scale.
    pub(crate) tpcc_absent: Vec<String>,
    /// A complete local snapshot with the dataset's key (its id).
    pub(crate) local_snapshot: Option<String>,
    /// Data checksums are on (read before a point that needs a checksum state).
    pub(crate) checksums_on: Option<bool>,
    /// The directory the last restore replaced is still there (kept for the next restore).
    pub(crate) spare: bool,
    pub(crate) tried: Tried,
}

/// What to do next: one action, journaled by its executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Do the interrupted restore of this snapshot again (files checked as they are copied).
    RedoRestore { snapshot: String },
    /// Put the plan's settings back after an interrupted load.
    RestoreSettings(Load),
    /// Make the dataset from the local snapshot with its key (every file checked).
    RestoreLocal { snapshot: String },
    /// Make the dataset from the store's snapshot with its key.
    RestoreFromStore { store: String },
    /// Create the database and load pgbench's tables (client-side, server-side or parallel).
    CreateAndLoad,
    /// Prepare the sysbench-tpcc datasets that are missing.
    PrepareTpcc,
    /// Keep the stopped data directory as the local snapshot.
    TakeSnapshot,
    /// Upload the local snapshot (resuming a journaled upload).
    UploadSnapshot { snapshot: String, store: String },
    /// Before a point: put the data directory back from the snapshot (sizes checked).
    PutBack {
        snapshot: String,
        /// The point it is put back for.
        point: String,
        reason: String,
    },
    /// Before a point: record that its workload now changes the data; the point starts.
    StartPoint { workload: String, warmup: bool },
    /// Remove the directory the last restore replaced.
    DiscardSpare,
    /// In place.
    Nothing,
}

impl Action {
    /// The actions that make a dataset: where a local snapshot with the dataset's key
    /// (when one is looked for) would be restored instead.
    pub(crate) fn makes(&self) -> bool {
        matches!(
            self,
            Action::RestoreFromStore { .. } | Action::CreateAndLoad | Action::PrepareTpcc
        )
    }

    /// Why the dataset is not in place, as the step's check reports it: for an action that
    /// makes a dataset, which of the plan's datasets is missing and how.
    pub(crate) fn why(&self, phase: &Phase, goal: &Goal, seen: &Observed) -> String {
        match self {
            Action::RedoRestore { snapshot } => {
                format!("the restore of snapshot {snapshot} was interrupted")
            }
            Action::RestoreSettings(Load::Parallel { .. }) => {
                "a parallel load was interrupted".into()
            }
            Action::RestoreSettings(Load::Tpcc { database }) => {
                format!("the sysbench-tpcc prepare of {database} was interrupted")
            }
            Action::RestoreLocal { .. }
            | Action::RestoreFromStore { .. }
            | Action::CreateAndLoad
            | Action::PrepareTpcc => match phase {
                Phase::Settled(s) if s.pgbench.is_none() && s.tpcc.is_empty() => {
                    "not initialised yet".into()
                }
                Phase::Settled(s) => {
                    let missing = missing(s, goal, seen);
                    if missing.is_empty() {
                        "the dataset is not there as planned".into()
                    } else {
                        missing.join("; ")
                    }
                }
                _ => "the dataset is not there as planned".into(),
            },
            Action::TakeSnapshot => "the dataset's snapshot is not taken yet".into(),
            Action::UploadSnapshot { store, .. } => format!("the snapshot is not in {store} yet"),
            Action::PutBack { reason, .. } => reason.clone(),
            Action::StartPoint { workload, .. } => format!("{workload} is to run on the data"),
            Action::DiscardSpare => "the directory the last restore replaced is left".into(),
            Action::Nothing => "in place".into(),
        }
    }
}

/// Each of the plan's datasets that is not made, and how (for the check's reason).
fn missing(s: &Settled, goal: &Goal, seen: &Observed) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(spec) = &goal.pgbench {
        match &s.pgbench {
            None => out.push(format!("pgbench's dataset ({spec}) is not made")),
            Some(made) if made != spec => out.push(format!(
                "pgbench's dataset was made as {made}, the plan asks {spec}"
            )),
            Some(_) if !seen.pgbench_present => {
                out.push("pgbench's tables are not there at the planned scale".into())
            }
            Some(_) => {}
        }
    }
    for t in &goal.tpcc {
        if !s.tpcc.contains(t) {
            out.push(format!("sysbench-tpcc dataset {t} is not prepared"));
        } else if seen.tpcc_absent.contains(t) {
            out.push(format!(
                "sysbench-tpcc dataset {t}'s tables are not there at its scale"
            ));
        }
    }
    out
}

/// The next action, from what the journal says, what the plan asks and what was observed.
pub(crate) fn next(phase: &Phase, goal: &Goal, seen: &Observed) -> Action {
    if goal.moment == Moment::SweepOver {
        // Whatever else holds, only the spare directory is the sweep's end's business.
        return if seen.spare {
            Action::DiscardSpare
        } else {
            Action::Nothing
        };
    }
    let s = match phase {
        Phase::Restoring { snapshot } => {
            return Action::RedoRestore {
                snapshot: snapshot.clone(),
            }
        }
        Phase::Loading(load) => return Action::RestoreSettings(load.clone()),
        Phase::Settled(s) => s,
    };
    let pgbench_made = match &goal.pgbench {
        None => true,
        Some(spec) => s.pgbench.as_ref() == Some(spec) && seen.pgbench_present,
    };
    let tpcc_made = goal
        .tpcc
        .iter()
        .all(|t| s.tpcc.contains(t) && !seen.tpcc_absent.contains(t));
    if !(pgbench_made && tpcc_made) {
        if let Some(id) = seen.local_snapshot.as_ref().filter(|_| goal.snapshots()) {
            return Action::RestoreLocal {
                snapshot: id.clone(),
            };
        }
        if let Some(store) = goal.store.as_ref().filter(|_| !seen.tried.store) {
            return Action::RestoreFromStore {
                store: store.clone(),
            };
        }
        return if pgbench_made {
            Action::PrepareTpcc
        } else {
            Action::CreateAndLoad
        };
    }
    let snapshot = s.snapshot.as_ref().and_then(SnapshotPhase::id);
    if goal.keep_snapshot && snapshot.is_none() {
        return Action::TakeSnapshot;
    }
    let upload = match (&goal.store, &s.snapshot) {
        (Some(store), Some(SnapshotPhase::Stored { store: there, .. })) if there == store => None,
        (Some(store), Some(sp)) if !seen.tried.upload => sp.id().map(|id| Action::UploadSnapshot {
            snapshot: id.to_string(),
            store: store.clone(),
        }),
        _ => None,
    };
    match &goal.moment {
        Moment::Point(p) => {
            if let Some(id) = snapshot.filter(|_| !seen.tried.put_back) {
                let checksums_differ = match (p.checksums, seen.checksums_on) {
                    (Some(want), Some(on)) => on != (want == Checksums::On),
                    _ => false,
                };
                if let Some(reason) = restore_reason(
                    goal.restore,
                    s.changed_by.as_ref().map(|c| c.workload.as_str()),
                    s.changed_by.as_ref().is_some_and(|c| c.warmup),
                    p,
                    checksums_differ,
                ) {
                    return Action::PutBack {
                        snapshot: id.to_string(),
                        point: p.id.clone(),
                        reason,
                    };
                }
            }
            // Before a point, only a snapshot this drive took (the dataset was made again)
            // is uploaded; one whose upload failed in the dataset step waits for the next
            // start.
            match upload.filter(|_| seen.tried.took_snapshot) {
                Some(up) => up,
                None => Action::StartPoint {
                    workload: p.workload.clone(),
                    warmup: p.warmup,
                },
            }
        }
        Moment::Step | Moment::SweepOver => upload.unwrap_or(Action::Nothing),
    }
}

/// Why a point needs the data directory put back first (None: it does not).
pub(crate) fn restore_reason(
    policy: RestorePolicy,
    changed_by: Option<&str>,
    changed_by_warmup: bool,
    point: &SweepPoint,
    checksums_differ: bool,
) -> Option<String> {
    let policy_reason = match (policy, changed_by) {
        (_, None) | (RestorePolicy::Never, _) => None,
        // A measured point right after its workload's warm-up runs on what the warm-up left
        // (that is the warm-up's purpose); a warm-up itself always starts from the snapshot.
        (RestorePolicy::EachPoint, Some(w))
            if changed_by_warmup && w == point.workload && !point.warmup =>
        {
            None
        }
        (RestorePolicy::EachPoint, Some(w)) => {
            Some(format!("restore = \"each-point\" and {w} ran on the data"))
        }
        (RestorePolicy::EachWorkload, Some(w)) if w == point.workload => None,
        (RestorePolicy::EachWorkload, Some(w)) => Some(format!(
            "restore = \"each-workload\" and {w} ran on the data"
        )),
    };
    policy_reason.or_else(|| {
        checksums_differ.then(|| "the point's checksum state comes from the snapshot".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = "db=pgbench scale=1 fillfactor=100 init=Client";
    const TPCC: &str = "db=sbtest_w1_t1 tables=1 scale=1 use_fk=false";
    const STORE: &str = "s3://snaps/fleet";

    fn point(workload: &str, warmup: bool) -> SweepPoint {
        let plan: crate::plan::Plan = toml::from_str(&format!(
            "[appliance]\nname = \"t\"\nplatform = \"debian12\"\n[postgres]\n[tuning]\n[dataset]\nscale = 1\n\
             [[workloads]]\nname = \"{workload}\"\nclients = [1]\ntransactions = 10\n{}",
            if warmup { "warmup = \"1s\"\n" } else { "" }
        ))
        .expect("plan");
        let points = crate::sweep::expand(&plan, 2);
        points
            .into_iter()
            .find(|p| p.warmup == warmup)
            .expect("point")
    }

    #[test]
    fn each_policy_restores_at_its_boundaries() {
        use RestorePolicy::*;
        let tpcb = point("tpcb", false);
        let warm = point("tpcb", true);
        // Fresh data: nothing to put back, whatever the policy.
        for policy in [Never, EachWorkload, EachPoint] {
            assert_eq!(restore_reason(policy, None, false, &tpcb, false), None);
        }
        assert_eq!(
            restore_reason(Never, Some("other"), false, &tpcb, false),
            None
        );
        assert!(restore_reason(EachPoint, Some("tpcb"), false, &tpcb, false).is_some());
        // A warm-up and the point after it share one restore.
        assert_eq!(
            restore_reason(EachPoint, Some("tpcb"), true, &tpcb, false),
            None
        );
        assert!(restore_reason(EachPoint, Some("ro"), true, &warm, false).is_some());
        assert_eq!(
            restore_reason(EachWorkload, Some("tpcb"), false, &tpcb, false),
            None
        );
        assert!(
            restore_reason(EachWorkload, Some("ro"), false, &tpcb, false)
                .is_some_and(|r| r.contains("ro ran on the data"))
        );
        // The other checksum state comes from the snapshot, even with restore = "never".
        assert!(restore_reason(Never, Some("tpcb"), false, &tpcb, true)
            .is_some_and(|r| r.contains("checksum")));
        assert!(restore_reason(Never, None, false, &tpcb, true).is_some());
    }

    fn goal(moment: Moment) -> Goal {
        Goal {
            pgbench: Some(SPEC.into()),
            tpcc: Vec::new(),
            keep_snapshot: true,
            store: Some(STORE.into()),
            restore: RestorePolicy::EachWorkload,
            moment,
        }
    }

    fn no_snapshots(moment: Moment) -> Goal {
        Goal {
            keep_snapshot: false,
            store: None,
            restore: RestorePolicy::Never,
            ..goal(moment)
        }
    }

    fn stored(id: &str) -> Option<SnapshotPhase> {
        Some(SnapshotPhase::Stored {
            id: id.into(),
            store: STORE.into(),
        })
    }

    /// pgbench's dataset recorded, the snapshot stored.
    fn made() -> Settled {
        Settled {
            pgbench: Some(SPEC.into()),
            tpcc: Vec::new(),
            snapshot: stored("s1"),
            changed_by: None,
        }
    }

    fn present() -> Observed {
        Observed {
            pgbench_present: true,
            ..Observed::default()
        }
    }

    fn tried(f: impl FnOnce(&mut Tried)) -> Observed {
        let mut seen = present();
        f(&mut seen.tried);
        seen
    }

    fn changed_by(workload: &str, warmup: bool) -> Option<ChangedBy> {
        Some(ChangedBy {
            workload: workload.into(),
            warmup,
        })
    }

    fn start(p: &SweepPoint) -> Action {
        Action::StartPoint {
            workload: p.workload.clone(),
            warmup: p.warmup,
        }
    }

    #[test]
    fn the_journal_decodes_into_one_phase_what_is_in_flight_first() {
        assert_eq!(
            Phase::of(&DatasetState::default()),
            Phase::Settled(Settled::default())
        );
        let mut st = DatasetState {
            spec: Some(SPEC.into()),
            load_degree: Some(4),
            tpcc_preparing: Some("sbtest_w1_t1".into()),
            restoring: Some("s1".into()),
            snapshot: Some("s1".into()),
            ..DatasetState::default()
        };
        assert_eq!(
            Phase::of(&st),
            Phase::Restoring {
                snapshot: "s1".into()
            }
        );
        st.restoring = None;
        assert_eq!(
            Phase::of(&st),
            Phase::Loading(Load::Tpcc {
                database: "sbtest_w1_t1".into()
            })
        );
        st.tpcc_preparing = None;
        assert_eq!(Phase::of(&st), Phase::Loading(Load::Parallel { degree: 4 }));
        st.load_degree = None;
        let settled = |st: &DatasetState| match Phase::of(st) {
            Phase::Settled(s) => s,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            settled(&st).snapshot,
            Some(SnapshotPhase::Taken { id: "s1".into() })
        );
        st.snapshot_upload = Some(crate::snapshot::store::UploadProgress::default());
        assert_eq!(
            settled(&st).snapshot,
            Some(SnapshotPhase::Uploading { id: "s1".into() })
        );
        st.snapshot_stored = Some(STORE.into());
        st.changed_by = Some("rw".into());
        st.changed_by_warmup = true;
        st.tpcc = vec![TPCC.into()];
        assert_eq!(
            settled(&st),
            Settled {
                pgbench: Some(SPEC.into()),
                tpcc: vec![TPCC.into()],
                snapshot: stored("s1"),
                changed_by: changed_by("rw", true),
            }
        );
        // Stored without a local snapshot (a store restore that keeps none): nothing to upload.
        st.snapshot = None;
        assert_eq!(settled(&st).snapshot, None);
    }

    #[test]
    fn what_an_interrupted_start_left_is_recovered_first_whatever_is_observed() {
        let p = point("rw", false);
        for moment in [Moment::Step, Moment::Point(p)] {
            let g = goal(moment);
            let restoring = Phase::Restoring {
                snapshot: "s1".into(),
            };
            assert_eq!(
                next(&restoring, &g, &present()),
                Action::RedoRestore {
                    snapshot: "s1".into()
                }
            );
            let parallel = Phase::Loading(Load::Parallel { degree: 8 });
            assert_eq!(
                next(&parallel, &g, &present()),
                Action::RestoreSettings(Load::Parallel { degree: 8 })
            );
            let tpcc = Phase::Loading(Load::Tpcc {
                database: "sbtest_w1_t1".into(),
            });
            assert_eq!(
                next(&tpcc, &g, &Observed::default()),
                Action::RestoreSettings(Load::Tpcc {
                    database: "sbtest_w1_t1".into()
                })
            );
        }
    }

    #[test]
    fn a_dataset_not_made_is_restored_local_then_store_else_generated() {
        let nothing = Phase::Settled(Settled::default());
        let g = goal(Moment::Step);
        let local = Observed {
            local_snapshot: Some("k1".into()),
            ..Observed::default()
        };
        assert_eq!(
            next(&nothing, &g, &local),
            Action::RestoreLocal {
                snapshot: "k1".into()
            }
        );
        assert_eq!(
            next(&nothing, &g, &Observed::default()),
            Action::RestoreFromStore {
                store: STORE.into()
            }
        );
        let store_tried = tried(|t| t.store = true);
        assert_eq!(next(&nothing, &g, &store_tried), Action::CreateAndLoad);
        // A plan that keeps no snapshot generates, even beside a snapshot with its key.
        assert_eq!(
            next(&nothing, &no_snapshots(Moment::Step), &local),
            Action::CreateAndLoad
        );
        // Kept locally, not shared: no store to ask.
        let local_only = Goal {
            store: None,
            ..goal(Moment::Step)
        };
        assert_eq!(
            next(&nothing, &local_only, &Observed::default()),
            Action::CreateAndLoad
        );
    }

    #[test]
    fn a_load_killed_midway_is_loaded_again() {
        let g = no_snapshots(Moment::Step);
        // pgbench -i killed: its spec was cleared when it started, whatever tables it left.
        let killed = Phase::Settled(Settled {
            pgbench: None,
            ..made()
        });
        assert_eq!(next(&killed, &g, &present()), Action::CreateAndLoad);
        // Recorded, but the tables are not there at the planned scale.
        let gone = Phase::Settled(made());
        assert_eq!(next(&gone, &g, &Observed::default()), Action::CreateAndLoad);
        // Recorded for another scale.
        let other = Phase::Settled(Settled {
            pgbench: Some("db=pgbench scale=2 fillfactor=100 init=Client".into()),
            ..made()
        });
        assert_eq!(next(&other, &g, &present()), Action::CreateAndLoad);
        assert_eq!(next(&gone, &g, &present()), Action::Nothing);
    }

    #[test]
    fn sysbench_tpcc_datasets_are_prepared_when_unrecorded_or_absent() {
        let g = Goal {
            tpcc: vec![TPCC.into()],
            ..no_snapshots(Moment::Step)
        };
        let pgbench_only = Phase::Settled(made());
        assert_eq!(next(&pgbench_only, &g, &present()), Action::PrepareTpcc);
        let both = Phase::Settled(Settled {
            tpcc: vec![TPCC.into()],
            ..made()
        });
        assert_eq!(next(&both, &g, &present()), Action::Nothing);
        let absent = Observed {
            tpcc_absent: vec![TPCC.into()],
            ..present()
        };
        assert_eq!(next(&both, &g, &absent), Action::PrepareTpcc);
        // pgbench's missing as well: its load comes first.
        assert_eq!(next(&both, &g, &Observed::default()), Action::CreateAndLoad);
        // No pgbench workload: its tables are not looked at.
        let tpcc_only = Goal {
            pgbench: None,
            ..g.clone()
        };
        let none = Phase::Settled(Settled::default());
        assert_eq!(
            next(&none, &tpcc_only, &Observed::default()),
            Action::PrepareTpcc
        );
        let prepared = Phase::Settled(Settled {
            tpcc: vec![TPCC.into()],
            ..Settled::default()
        });
        assert_eq!(
            next(&prepared, &tpcc_only, &Observed::default()),
            Action::Nothing
        );
    }

    #[test]
    fn a_made_dataset_is_snapshotted_then_uploaded_once() {
        let g = goal(Moment::Step);
        let with = |snapshot| Phase::Settled(Settled { snapshot, ..made() });
        assert_eq!(next(&with(None), &g, &present()), Action::TakeSnapshot);
        let upload = Action::UploadSnapshot {
            snapshot: "s1".into(),
            store: STORE.into(),
        };
        // Killed between the snapshot and its upload, or inside the upload.
        let taken = with(Some(SnapshotPhase::Taken { id: "s1".into() }));
        assert_eq!(next(&taken, &g, &present()), upload);
        let uploading = with(Some(SnapshotPhase::Uploading { id: "s1".into() }));
        assert_eq!(next(&uploading, &g, &present()), upload);
        assert_eq!(next(&with(stored("s1")), &g, &present()), Action::Nothing);
        let elsewhere = with(Some(SnapshotPhase::Stored {
            id: "s1".into(),
            store: "s3://other/place".into(),
        }));
        assert_eq!(next(&elsewhere, &g, &present()), upload);
        // An upload that failed in this start is left to the next one.
        assert_eq!(
            next(&taken, &g, &tried(|t| t.upload = true)),
            Action::Nothing
        );
        // Without a store, a taken snapshot is all.
        let local_only = Goal {
            store: None,
            ..g.clone()
        };
        assert_eq!(next(&taken, &local_only, &present()), Action::Nothing);
        // No snapshot kept: nothing after the load.
        assert_eq!(
            next(&with(None), &no_snapshots(Moment::Step), &present()),
            Action::Nothing
        );
    }

    #[test]
    fn before_a_point_the_data_is_put_back_as_the_plan_says_once() {
        let rw = point("rw", false);
        let ro = point("ro", false);
        let at = |changed| {
            Phase::Settled(Settled {
                changed_by: changed,
                ..made()
            })
        };
        let g = |p: &SweepPoint| goal(Moment::Point(p.clone()));
        // Fresh data: the point starts.
        assert_eq!(next(&at(None), &g(&rw), &present()), start(&rw));
        // Another workload ran on it: put back first.
        let after_rw = at(changed_by("rw", false));
        assert_eq!(
            next(&after_rw, &g(&ro), &present()),
            Action::PutBack {
                snapshot: "s1".into(),
                point: ro.id.clone(),
                reason: "restore = \"each-workload\" and rw ran on the data".into()
            }
        );
        assert_eq!(next(&after_rw, &g(&rw), &present()), start(&rw));
        // Put back once: then the point starts.
        assert_eq!(
            next(&after_rw, &g(&ro), &tried(|t| t.put_back = true)),
            start(&ro)
        );
        // The checksum variant is made from the snapshot.
        let mut cs = ro.clone();
        cs.checksums = Some(Checksums::On);
        let off = Observed {
            checksums_on: Some(false),
            ..present()
        };
        assert!(matches!(
            next(&at(None), &g(&cs), &off),
            Action::PutBack { reason, .. } if reason.contains("checksum state")
        ));
        let on = Observed {
            checksums_on: Some(true),
            ..present()
        };
        assert_eq!(next(&at(None), &g(&cs), &on), start(&cs));
        // No snapshot: nothing to put back.
        let none = Phase::Settled(Settled {
            snapshot: None,
            changed_by: changed_by("rw", false),
            ..made()
        });
        assert_eq!(
            next(&none, &no_snapshots(Moment::Point(ro.clone())), &present()),
            start(&ro)
        );
    }

    #[test]
    fn before_a_point_a_failed_upload_waits_but_a_snapshot_taken_again_is_shared() {
        let rw = point("rw", false);
        let g = goal(Moment::Point(rw.clone()));
        let taken = Phase::Settled(Settled {
            snapshot: Some(SnapshotPhase::Taken { id: "s2".into() }),
            ..made()
        });
        assert_eq!(next(&taken, &g, &present()), start(&rw));
        assert_eq!(
            next(&taken, &g, &tried(|t| t.took_snapshot = true)),
            Action::UploadSnapshot {
                snapshot: "s2".into(),
                store: STORE.into()
            }
        );
        // A corrupt snapshot found when putting back: the journal forgot the dataset.
        let forgotten = Phase::Settled(Settled {
            pgbench: None,
            snapshot: None,
            changed_by: changed_by("ro", false),
            ..made()
        });
        let put_back = tried(|t| t.put_back = true);
        assert_eq!(
            next(&forgotten, &g, &put_back),
            Action::RestoreFromStore {
                store: STORE.into()
            }
        );
        let mut store_tried = put_back.clone();
        store_tried.tried.store = true;
        assert_eq!(next(&forgotten, &g, &store_tried), Action::CreateAndLoad);
    }

    #[test]
    fn after_the_sweep_only_the_spare_directory_goes() {
        let spare = Observed {
            spare: true,
            ..Observed::default()
        };
        for phase in [
            Phase::Settled(made()),
            Phase::Settled(Settled::default()),
            Phase::Restoring {
                snapshot: "s1".into(),
            },
        ] {
            assert_eq!(
                next(&phase, &goal(Moment::SweepOver), &spare),
                Action::DiscardSpare
            );
            assert_eq!(
                next(&phase, &goal(Moment::SweepOver), &Observed::default()),
                Action::Nothing
            );
        }
    }

    #[test]
    fn the_check_names_what_is_left() {
        let nothing = Phase::Settled(Settled::default());
        let g = goal(Moment::Step);
        let absent = Observed::default();
        let why = |a: &Action, phase: &Phase, seen: &Observed| a.why(phase, &g, seen);
        assert_eq!(
            why(&Action::CreateAndLoad, &nothing, &absent),
            "not initialised yet"
        );
        // Made as planned, but the tables are gone.
        assert_eq!(
            why(&Action::CreateAndLoad, &Phase::Settled(made()), &absent),
            "pgbench's tables are not there at the planned scale"
        );
        // Made with another spec; a sysbench-tpcc dataset not prepared, another dropped.
        let g = Goal {
            tpcc: vec!["tpcc-a".into(), "tpcc-b".into()],
            ..goal(Moment::Step)
        };
        let other = Settled {
            pgbench: Some("scale=2".into()),
            tpcc: vec!["tpcc-b".into()],
            ..made()
        };
        let seen = Observed {
            tpcc_absent: vec!["tpcc-b".into()],
            ..present()
        };
        assert_eq!(
            Action::CreateAndLoad.why(&Phase::Settled(other), &g, &seen),
            format!(
                "pgbench's dataset was made as scale=2, the plan asks {SPEC}; \
                 sysbench-tpcc dataset tpcc-a is not prepared; \
                 sysbench-tpcc dataset tpcc-b's tables are not there at its scale"
            )
        );
        assert_eq!(
            why(
                &Action::RestoreSettings(Load::Parallel { degree: 2 }),
                &nothing,
                &absent
            ),
            "a parallel load was interrupted"
        );
        assert_eq!(
            why(
                &Action::UploadSnapshot {
                    snapshot: "s1".into(),
                    store: STORE.into()
                },
                &nothing,
                &absent
            ),
            format!("the snapshot is not in {STORE} yet")
        );
    }

    /// What each action leaves in the journal and on the server, as the step's executors
    /// do when they succeed.
    fn carry_out(a: &Action, st: &mut DatasetState, seen: &mut Observed) {
        match a {
            Action::RedoRestore { .. } => st.restoring = None,
            Action::RestoreSettings(Load::Parallel { .. }) => st.load_degree = None,
            Action::RestoreSettings(Load::Tpcc { .. }) => st.tpcc_preparing = None,
            Action::RestoreLocal { snapshot } => {
                st.spec = Some(SPEC.into());
                st.snapshot = Some(snapshot.clone());
                seen.pgbench_present = true;
            }
            Action::RestoreFromStore { .. } => seen.tried.store = true,
            Action::CreateAndLoad => {
                st.spec = Some(SPEC.into());
                st.snapshot = None;
                st.snapshot_stored = None;
                seen.pgbench_present = true;
            }
            Action::TakeSnapshot => {
                st.snapshot = Some("s9".into());
                seen.tried.took_snapshot = true;
            }
            Action::UploadSnapshot { store, .. } => st.snapshot_stored = Some(store.clone()),
            other => panic!("not expected here: {other:?}"),
        }
    }

    fn walk(mut st: DatasetState, mut seen: Observed, g: &Goal) -> Vec<Action> {
        let mut out = Vec::new();
        loop {
            let a = next(&Phase::of(&st), g, &seen);
            out.push(a.clone());
            if a == Action::Nothing || out.len() > 10 {
                return out;
            }
            carry_out(&a, &mut st, &mut seen);
        }
    }

    #[test]
    fn the_step_settles_from_every_interrupted_journal() {
        use Action::*;
        let g = goal(Moment::Step);
        let upload = UploadSnapshot {
            snapshot: "s9".into(),
            store: STORE.into(),
        };
        assert_eq!(
            walk(DatasetState::default(), Observed::default(), &g),
            vec![
                RestoreFromStore {
                    store: STORE.into()
                },
                CreateAndLoad,
                TakeSnapshot,
                upload.clone(),
                Nothing
            ]
        );
        // Killed in the parallel load, then after its snapshot.
        let loading = DatasetState {
            load_degree: Some(2),
            ..DatasetState::default()
        };
        let seen = tried(|t| t.store = true);
        assert_eq!(
            walk(loading, seen.clone(), &g),
            vec![
                RestoreSettings(Load::Parallel { degree: 2 }),
                CreateAndLoad,
                TakeSnapshot,
                upload,
                Nothing
            ]
        );
        // Killed in a restore of the sweep: redone, then the snapshot's upload resumed.
        let restoring = DatasetState {
            spec: Some(SPEC.into()),
            snapshot: Some("s1".into()),
            snapshot_upload: Some(crate::snapshot::store::UploadProgress::default()),
            restoring: Some("s1".into()),
            ..DatasetState::default()
        };
        assert_eq!(
            walk(restoring, present(), &g),
            vec![
                RedoRestore {
                    snapshot: "s1".into()
                },
                UploadSnapshot {
                    snapshot: "s1".into(),
                    store: STORE.into()
                },
                Nothing
            ]
        );
    }
}
