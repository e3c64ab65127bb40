//! [`MapRead`]: mapping one of the server's own buffers for reading, and
//! what a failure of it means.
//!
//! The buffers mapped this way (read staging, timestamp readbacks) are the
//! server's own, validated, and used by nothing else: the only way their map
//! or view fails is that the device went away, possibly before its lost
//! callback has run. Both are reported as [`ServerError::DeviceLost`].

use std::ops::Range;

use compute_runtime::ServerError;
use futures::channel::oneshot;

use crate::device::faults::DeviceFaults;

/// A `MAP_READ` buffer on its way to being mapped.
#[derive(Debug)]
pub(crate) struct MapRead {
    buffer: wgpu::Buffer,
    range: Range<u64>,
    mapped: oneshot::Receiver<Result<(), wgpu::BufferAsyncError>>,
}

impl MapRead {
    /// Asks for `range` of `buffer` to be mapped once the work before it
    /// has run (whoever polls the device drives it).
    pub fn start(buffer: wgpu::Buffer, range: Range<u64>) -> Self {
        let (tx, mapped) = oneshot::channel();
        buffer.map_async(wgpu::MapMode::Read, range.clone(), move |r| {
            let _ = tx.send(r);
        });
        MapRead {
            buffer,
            range,
            mapped,
        }
    }

    /// Waits for the map and views the range; `what` names the buffer in
    /// the error when the device went away.
    pub async fn view(
        self,
        faults: &DeviceFaults,
        what: &str,
    ) -> Result<(wgpu::BufferView, wgpu::Buffer), ServerError> {
        let failed = match self.mapped.await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("the map callback was dropped".to_owned()),
        };
        if let Some(why) = failed {
            return Err(faults.lost_during(&format!("mapping {what}"), why));
        }
        let view = self
            .buffer
            .slice(self.range)
            .get_mapped_range()
            .map_err(|e| faults.lost_during(&format!("viewing {what}"), e))?;
        Ok((view, self.buffer))
    }
}
