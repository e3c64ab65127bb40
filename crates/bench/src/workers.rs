//! A fixed pool of worker threads, started before any timing: what a
//! caller using chunks as they land hands them to (a thread start per chunk
//! would be timed as the use's cost, not the transfer's).

use std::sync::mpsc;
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() -> u64 + Send>;

/// Threads that run jobs in the order given, round robin, and report
/// what each returns.
pub struct Workers {
    jobs: Vec<mpsc::Sender<Job>>,
    done: mpsc::Receiver<u64>,
    threads: Vec<JoinHandle<()>>,
    next: usize,
}

impl Workers {
    /// One worker per core the process may use.
    pub fn per_core() -> Self {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let (report, done) = mpsc::channel();
        let mut jobs = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = mpsc::channel::<Job>();
            let report = report.clone();
            threads.push(std::thread::spawn(move || {
                for job in rx {
                    if report.send(job()).is_err() {
                        break;
                    }
                }
            }));
            jobs.push(tx);
        }
        Workers {
            jobs,
            done,
            threads,
            next: 0,
        }
    }

    /// Runs `job` on the next worker.
    pub fn run(&mut self, job: impl FnOnce() -> u64 + Send + 'static) {
        let i = self.next % self.jobs.len();
        self.next += 1;
        let _ = self.jobs[i].send(Box::new(job));
    }

    /// Waits for `count` jobs and returns the wrapping sum of their results.
    pub fn gather(&self, count: usize) -> u64 {
        (0..count)
            .map_while(|_| self.done.recv().ok())
            .fold(0u64, u64::wrapping_add)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.jobs.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
