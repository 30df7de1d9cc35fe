//! A small team of threads that stay awake between jobs, for kernels whose calls
//! come in quick succession with little work each: first the quantized GEMVs of an
//! LLM decode step (hundreds per token, 10-50 us each), now every parallel pass of
//! ours (see the end of these notes).
//!
//! Why not the rayon pool: its idle workers go to sleep within microseconds, and on
//! a virtual machine waking one measured 40-90 us, more than the work it was woken
//! for. SmolLM2-135M decoded at 35-43 tokens/s with its GEMVs split over the pool
//! and 51-53 with them on one thread. A team thread instead stays awake for `SPIN` after
//! each job before it parks (as OpenMP's workers do under PyTorch), so the next job,
//! a few tens of microseconds later, finds it running. It waits in `yield_now`, not
//! a busy spin: with one, an LSTM's time loop (on the team) followed by the next
//! layer's input projection (on rayon) ran with the team thread holding one of two
//! cores, 6.5 ms a forward against 5.6 with the yield.
//!
//! A job is `tasks` indices claimed one at a time from a shared counter by the
//! caller and the team alike; the caller returns when all are done. Only one job
//! runs at a time: a call made while another is in progress (another Python thread,
//! or from inside a task) or with one thread runs its tasks on the calling thread. A
//! forked child builds a team of its own on its first parallel call.
//!
//! Since the same wake-up cost and thread placement decide every pass of 20-500 us
//! (norms, softmax, pooling, elementwise maps, the convolutions' tasks), all of our
//! kernels split their work here (`ops::parallel`); rayon's pool is left to the
//! `gemm` crate's products.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long an idle team thread stays awake (yielding its core) before it parks.
const SPIN: Duration = Duration::from_micros(500);

/// One job: the task function (a pointer to a `&dyn Fn`, valid until `done == tasks`,
/// which the caller waits for) and its counters.
struct Job {
    f: *const (dyn Fn(usize) + Sync),
    tasks: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    /// A task panicked (on whichever thread): the caller panics in turn once all are
    /// done, so the binding reports an error instead of the caller waiting forever.
    panicked: AtomicBool,
    /// A pinned job (`for_each_pinned`): task `i` is run by team thread `i` (the caller
    /// is 0), unless the caller takes it over; `claimed[i]` says it was taken.
    claimed: Option<Vec<AtomicBool>>,
}

// SAFETY: `f` points to a `Sync` closure that the publishing call keeps alive until
// every task has run; team threads call it only for task indices below `tasks`,
// which are all claimed (and finished) before that call returns.
unsafe impl Send for Job {}
// SAFETY: as above; the counters are atomics.
unsafe impl Sync for Job {}

impl Job {
    /// Claim and run tasks until none is left; in a pinned job, run task `me` (the
    /// thread's index in the team) if nobody took it.
    fn work(&self, me: usize) {
        if let Some(claimed) = &self.claimed {
            if claimed.get(me).is_some_and(|c| !c.swap(true, SeqCst)) {
                self.run(me);
            }
            return;
        }
        loop {
            let t = self.next.fetch_add(1, SeqCst);
            if t >= self.tasks {
                return;
            }
            self.run(t);
        }
    }

    /// Run task `t` (claimed by this thread, `t < tasks`) and count it done.
    fn run(&self, t: usize) {
        // SAFETY: t < tasks and not yet counted done, so the caller has not returned
        // (it waits for `done == tasks`) and `f` is alive.
        let f = unsafe { &*self.f };
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(t))).is_err() {
            self.panicked.store(true, SeqCst);
        }
        self.done.fetch_add(1, SeqCst);
    }
}

struct Team {
    size: usize,
    pid: u32,
    /// Bumped for every published job (and at shutdown).
    epoch: AtomicUsize,
    slot: Mutex<Option<Arc<Job>>>,
    busy: AtomicBool,
    exit: AtomicBool,
    sleepers: AtomicUsize,
    park: Mutex<()>,
    wake: Condvar,
}

static TEAM: Mutex<Option<Arc<Team>>> = Mutex::new(None);

fn worker(team: Arc<Team>, me: usize) {
    let mut seen = team.epoch.load(SeqCst);
    loop {
        let start = Instant::now();
        while team.epoch.load(SeqCst) == seen {
            if start.elapsed() > SPIN {
                let mut g = team.park.lock().unwrap_or_else(|p| p.into_inner());
                team.sleepers.fetch_add(1, SeqCst);
                while team.epoch.load(SeqCst) == seen {
                    g = team.wake.wait(g).unwrap_or_else(|p| p.into_inner());
                }
                team.sleepers.fetch_sub(1, SeqCst);
                break;
            }
            // Yield rather than spin on the core: a rayon worker (or any thread) that
            // is runnable on this CPU gets it at once, so the team's idle wait never
            // holds a core that the next parallel pass outside the team needs.
            std::thread::yield_now();
        }
        seen = team.epoch.load(SeqCst);
        if team.exit.load(SeqCst) {
            return;
        }
        let job = team.slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(job) = job {
            job.work(me);
        }
    }
}

/// The team for `threads` threads in all (the caller plus `threads - 1`), built or
/// rebuilt as needed (another size, a forked child); None where it cannot run (one
/// thread, no threads to be had, the lock held by a parent thread at a fork).
fn team(threads: usize) -> Option<Arc<Team>> {
    if threads < 2 {
        return None;
    }
    let pid = std::process::id();
    // try_lock: a forked child whose parent forked while another thread held this
    // lock would otherwise wait for it forever; contention only costs a serial run.
    let mut g = match TEAM.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return None,
    };
    if g.as_ref().is_some_and(|t| t.pid != pid) {
        // A forked child: the team's threads are the parent's and do not exist here.
        // Its state is left alone (never dropped: a parent thread may have held its
        // locks at the fork) and a team of this process's own is built below.
        std::mem::forget(g.take());
    }
    if let Some(t) = g.as_ref() {
        if t.size == threads {
            return Some(t.clone());
        }
        // Another size (set_num_threads): let the old threads finish and exit.
        t.exit.store(true, SeqCst);
        t.epoch.fetch_add(1, SeqCst);
        let _p = t.park.lock().unwrap_or_else(|p| p.into_inner());
        t.wake.notify_all();
    }
    let t = Arc::new(Team {
        size: threads,
        pid,
        epoch: AtomicUsize::new(0),
        slot: Mutex::new(None),
        busy: AtomicBool::new(false),
        exit: AtomicBool::new(false),
        sleepers: AtomicUsize::new(0),
        park: Mutex::new(()),
        wake: Condvar::new(),
    });
    for i in 1..threads {
        let tc = t.clone();
        if std::thread::Builder::new().name(format!("candle-py-team-{i}")).spawn(move || worker(tc, i)).is_err() {
            t.exit.store(true, SeqCst);
            return None; // no threads to be had: run on the caller
        }
    }
    *g = Some(t.clone());
    Some(t)
}

/// Run `f(0..tasks)` on the caller and the team of `super::pool::num_threads()`
/// threads; returns when every task has run. Tasks must be independent.
pub(crate) fn for_each(tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    let team = if tasks > 1 { team(super::pool::num_threads()) } else { None };
    if !team.is_some_and(|t| run_on(&t, tasks, f, false)) {
        (0..tasks).for_each(f);
    }
}

/// `for_each` with task `i` run by the team's thread `i` (the caller runs task 0), for
/// a time loop whose tasks own the same data at every step: a recurrent layer's
/// thread keeps its share of the weight in its core's L2 and its units of the state
/// in L1. Claimed one at a time from a counter, the shares swapped threads from step
/// to step, and a step's product then read its weight from the other core (an LSTM
/// step split by units took 43-58 us, pinned 42-43). A task whose thread has not
/// started it after `STEAL` (asleep, or descheduled) is run by the caller. Where
/// `tasks` exceeds the team this is `for_each`.
pub(crate) fn for_each_pinned(tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    let team = if tasks > 1 { team(super::pool::num_threads()) } else { None };
    let team = team.filter(|t| tasks <= t.size);
    if !team.is_some_and(|t| run_on(&t, tasks, f, true)) {
        (0..tasks).for_each(f);
    }
}

/// How long the caller of a pinned job waits for a team thread to start its task
/// before running it itself: a thread that is awake starts within a few microseconds;
/// one that parked takes 40-90 us to wake on a virtual machine.
const STEAL: Duration = Duration::from_micros(30);

/// Run the job on `t` with the caller taking part; false (nothing run) when the team
/// is busy with another job.
fn run_on(t: &Team, tasks: usize, f: &(dyn Fn(usize) + Sync), pinned: bool) -> bool {
    if t.busy.compare_exchange(false, true, SeqCst, SeqCst).is_err() {
        return false;
    }
    // SAFETY (lifetime): the job holds `f` as a raw pointer; this call waits below
    // until every task index has been claimed and run, after which no team thread
    // calls it (see `Job::work`), so the borrow outlives every use.
    let f_static: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f as *const (dyn Fn(usize) + Sync)) };
    let claimed = pinned.then(|| (0..tasks).map(|_| AtomicBool::new(false)).collect());
    let job = Arc::new(Job {
        f: f_static,
        tasks,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        panicked: AtomicBool::new(false),
        claimed,
    });
    *t.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(job.clone());
    t.epoch.fetch_add(1, SeqCst);
    if t.sleepers.load(SeqCst) > 0 {
        let _p = t.park.lock().unwrap_or_else(|p| p.into_inner());
        t.wake.notify_all();
    }
    job.work(0);
    // Only a pinned job's wait is timed (for the steal).
    let start = pinned.then(Instant::now);
    while job.done.load(SeqCst) < tasks {
        if let Some(claimed) = job.claimed.as_ref().filter(|_| start.is_some_and(|s| s.elapsed() > STEAL)) {
            for (i, c) in claimed.iter().enumerate() {
                if !c.swap(true, SeqCst) {
                    job.run(i);
                }
            }
        }
        std::hint::spin_loop();
    }
    *t.slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    t.busy.store(false, SeqCst);
    if job.panicked.load(SeqCst) {
        panic!("a task of a parallel kernel panicked");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run_on` on the process's one team, retried while another test (the qmatmul
    /// ones run their kernels on it too) holds it: a busy team refuses a job.
    fn run(threads: usize, tasks: usize, f: &(dyn Fn(usize) + Sync)) -> Arc<Team> {
        loop {
            if let Some(t) = team(threads) {
                if run_on(&t, tasks, f, false) {
                    return t;
                }
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn every_task_runs_once_across_jobs_and_sizes() {
        for threads in [2, 3, 2] {
            for tasks in [0, 1, 2, 7, 100] {
                let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                let t = run(threads, tasks, &|i| {
                    hits[i].fetch_add(1, SeqCst);
                });
                assert_eq!(t.size, threads);
                assert!(hits.iter().all(|h| h.load(SeqCst) == 1));
            }
            std::thread::sleep(Duration::from_millis(2)); // let the threads park once
        }
    }

    /// A pinned job: every task runs once, task 0 on the caller and task 1 on team
    /// thread 1 (or, when that thread is parked or late, on the caller), also right
    /// after the team parked; a panicking pinned task panics the caller.
    #[test]
    fn pinned_tasks_run_once_on_their_own_thread() {
        let caller = std::thread::current().id();
        for round in 0..40 {
            let hits: Vec<AtomicUsize> = (0..2).map(|_| AtomicUsize::new(0)).collect();
            let ran_on: Mutex<Vec<(usize, std::thread::ThreadId, Option<String>)>> = Mutex::new(Vec::new());
            let f = |i: usize| {
                hits[i].fetch_add(1, SeqCst);
                let me = std::thread::current();
                ran_on.lock().unwrap().push((i, me.id(), me.name().map(String::from)));
            };
            loop {
                if team(2).is_some_and(|t| run_on(&t, 2, &f, true)) {
                    break;
                }
                std::thread::yield_now();
            }
            assert!(hits.iter().all(|h| h.load(SeqCst) == 1), "round {round}");
            for (i, id, name) in ran_on.into_inner().unwrap() {
                let on_team = name.as_deref() == Some("candle-py-team-1");
                assert!(id == caller || (i == 1 && on_team), "round {round}: task {i} ran on {name:?}");
            }
            if round % 10 == 9 {
                std::thread::sleep(Duration::from_millis(2)); // the team parks
            }
        }
        let r = std::panic::catch_unwind(|| loop {
            if team(2).is_some_and(|t| run_on(&t, 2, &|i| assert!(i != 1, "task 1"), true)) {
                break;
            }
            std::thread::yield_now();
        });
        assert!(r.is_err());
    }

    #[test]
    fn a_panicking_task_panics_the_caller_instead_of_hanging() {
        let r = std::panic::catch_unwind(|| run(2, 16, &|i| assert!(i != 9, "task 9")));
        assert!(r.is_err());
        run(2, 4, &|_| {}); // the team still works
    }
}
