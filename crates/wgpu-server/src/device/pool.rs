//! Devices kept for the life of the process: a server opened through
//! `WgpuServerOptions::open` (a floor above) leases a device of its
//! adapter and gives it back when it drops; the next server of that
//! adapter takes it again instead of creating one.
//!
//! Why: NVIDIA's driver (580.159.04, on an H200) deadlocks when devices are
//! torn down on several threads at once: seen as the GPU suite hanging with
//! four test threads, every thread inside the driver (one `vkDestroyDevice`
//! joining a driver thread whose exit waits on a lock, other threads'
//! `vkDestroyCommandPool` and queue teardown waiting on the driver's locks,
//! another `vkDestroyDevice` on the loader's). A device that is never
//! destroyed is never torn down concurrently; what a server made on it
//! (buffers, pipelines) is freed as usual. The pool holds at most as many
//! devices per adapter as servers were open at once. A lost device is never
//! given back. A device the caller made (`WgpuServerOptions::build`, the
//! seed's `new`) is the caller's, and is not pooled.

use std::sync::{Arc, Mutex};

use compute_runtime::ServerError;

use crate::device::faults::DeviceFaults;

/// A pooled device and what it was opened from.
struct Pooled {
    key: PoolKey,
    adapter: wgpu::Adapter,
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// Its last server's record, where a loss still shows until the next
    /// server installs its own.
    faults: Arc<DeviceFaults>,
}

impl Pooled {
    /// Whether the device is lost. wgpu tells a destroyed device's loss
    /// only when the device is next polled, so poll first.
    fn lost(&self) -> bool {
        // A lost device may answer the poll with an error: the record says.
        let _ = self.device.poll(wgpu::PollType::Poll);
        self.faults.lost().is_err()
    }
}

/// How long a device given back may still be busy with its last server's
/// work; one busy longer is not pooled.
const IDLE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `device` is idle and not lost. wgpu tells a destroyed device's
/// loss only once its queue is empty (at a poll), so a poll that does not
/// wait can miss it: seen on the H200 under load, where a destroyed device
/// was pooled and served the next server.
fn idle_and_alive(device: &wgpu::Device, faults: &DeviceFaults) -> bool {
    let wait = wgpu::PollType::Wait {
        submission_index: None,
        timeout: Some(IDLE_WAIT),
    };
    // The lease is the device's only user now: no submit can race the wait.
    let idle = matches!(device.poll(wait), Ok(wgpu::PollStatus::QueueEmpty));
    idle && faults.lost().is_ok()
}

/// Which adapter a device is of: its place in the ranking, under the
/// adapter choice of the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PoolKey {
    pub index: usize,
    pub choice: Option<String>,
    /// Whether the device was asked for cooperative matrices.
    pub cooperative: bool,
}

static POOL: Mutex<Vec<Pooled>> = Mutex::new(Vec::new());

fn pool() -> std::sync::MutexGuard<'static, Vec<Pooled>> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device leased from the pool; dropping the lease gives it back unless
/// it was lost.
pub(crate) struct DeviceLease {
    key: PoolKey,
    adapter: wgpu::Adapter,
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// Told the device was lost (set once the server watches it).
    faults: Option<Arc<DeviceFaults>>,
}

impl std::fmt::Debug for DeviceLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceLease")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl DeviceLease {
    /// A device of adapter `key`: a pooled one, else what `open` makes.
    pub fn take(
        key: PoolKey,
        open: impl FnOnce() -> Result<(wgpu::Adapter, wgpu::Device, wgpu::Queue), ServerError>,
    ) -> Result<Self, ServerError> {
        let pooled = loop {
            let taken = {
                let mut pool = pool();
                // The most recently given back: its memory is the warmest.
                let at = pool.iter().rposition(|p| p.key == key);
                at.map(|i| pool.swap_remove(i))
            };
            match taken {
                // Lost while pooled: dropped, on this thread alone.
                Some(p) if p.lost() => continue,
                taken => break taken,
            }
        };
        let (adapter, device, queue) = match pooled {
            Some(p) => (p.adapter, p.device, p.queue),
            None => open()?,
        };
        Ok(DeviceLease {
            key,
            adapter,
            device,
            queue,
            faults: None,
        })
    }

    pub fn adapter(&self) -> &wgpu::Adapter {
        &self.adapter
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Where the server hears of the device's loss: a lost device is not
    /// given back.
    pub fn watch(&mut self, faults: Arc<DeviceFaults>) {
        self.faults = Some(faults);
    }
}

impl Drop for DeviceLease {
    fn drop(&mut self) {
        let Some(faults) = self.faults.take() else {
            return;
        };
        if !idle_and_alive(&self.device, &faults) {
            return;
        }
        pool().push(Pooled {
            key: self.key.clone(),
            adapter: self.adapter.clone(),
            device: self.device.clone(),
            queue: self.queue.clone(),
            faults,
        });
    }
}
