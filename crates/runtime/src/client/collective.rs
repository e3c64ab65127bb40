//! Collectives through a client.

use super::ComputeClient;
use crate::{ComputeWait, DeviceId, Handle, Reduction, Server, ServerCommunication, ServerError};

/// Collectives, for a server that implements them: each device's client
/// makes the same calls, in the same order, naming the same devices
/// (`devices`, in rank order). These calls take the element type in the
/// [`Reduction`]; a [`Communicator`](super::Communicator) names the devices
/// once and takes the element type from typed handles.
///
/// ```
/// use wgpu_server::prelude::*;
///
/// // Two devices of one adapter stand for two GPUs.
/// let devices = [DeviceId(10), DeviceId(11)];
/// let clients = devices
///     .iter()
///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
///     .collect::<Result<Vec<_>, _>>()?;
/// let mut sums = Vec::new();
/// for (rank, c) in clients.iter().enumerate() {
///     c.comm_init(&devices)?;
///     let src = c.create_from_slice(&[rank as f32 + 1.0; 8])?;
///     let dst = c.empty(32)?;
///     c.all_reduce(&src, &dst, Reduction::sum(DType::F32), &devices, ComputeWait::Wait)?;
///     sums.push(dst);
/// }
/// for (c, dst) in clients.iter().zip(&sums) {
///     assert_eq!(c.read_vec::<f32>(dst)?, [3.0; 8]); // 1 + 2 on every rank
/// }
/// # Ok::<(), ServerError>(())
/// ```
impl<S: Server + ServerCommunication> ComputeClient<S> {
    /// Joins the communicator of `devices` (every rank calls it).
    pub fn comm_init(&self, devices: &[DeviceId]) -> Result<(), ServerError> {
        self.server().comm_init(devices.to_vec())
    }

    /// Reduces every rank's `src` element-wise into every rank's `dst`.
    /// `Wait`: later work on the stream sees the result; `Overlap`: call
    /// [`sync_collective`](Self::sync_collective) before using it.
    pub fn all_reduce(
        &self,
        src: &Handle,
        dst: &Handle,
        reduction: Reduction,
        devices: &[DeviceId],
        wait: ComputeWait,
    ) -> Result<(), ServerError> {
        self.server().all_reduce(
            src.binding(),
            dst.binding(),
            reduction,
            self.stream,
            devices.to_vec(),
            wait,
        )
    }

    /// Writes every rank's `src`, concatenated in rank order, to `dst`.
    pub fn all_gather(
        &self,
        src: &Handle,
        dst: &Handle,
        devices: &[DeviceId],
    ) -> Result<(), ServerError> {
        self.server()
            .all_gather(src.binding(), dst.binding(), self.stream, devices.to_vec())
    }

    /// Reduces every rank's `src` and writes this rank's chunk to `dst`.
    pub fn reduce_scatter(
        &self,
        src: &Handle,
        dst: &Handle,
        reduction: Reduction,
        devices: &[DeviceId],
    ) -> Result<(), ServerError> {
        self.server().reduce_scatter(
            src.binding(),
            dst.binding(),
            reduction,
            self.stream,
            devices.to_vec(),
        )
    }

    /// Writes `root`'s `src` to every rank's `dst`; only `root` passes a
    /// `src`.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let devices = [DeviceId(20), DeviceId(21), DeviceId(22)];
    /// let clients = devices
    ///     .iter()
    ///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let mut dsts = Vec::new();
    /// for (rank, c) in clients.iter().enumerate() {
    ///     c.comm_init(&devices)?;
    ///     let src = if rank == 1 { Some(c.create_from_slice(&[42u64; 4])?) } else { None };
    ///     let dst = c.empty(32)?;
    ///     c.broadcast(src.as_ref(), &dst, DeviceId(21), &devices)?;
    ///     dsts.push(dst);
    /// }
    /// for (c, dst) in clients.iter().zip(&dsts) {
    ///     assert_eq!(c.read_vec::<u64>(dst)?, [42; 4]);
    /// }
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn broadcast(
        &self,
        src: Option<&Handle>,
        dst: &Handle,
        root: DeviceId,
        devices: &[DeviceId],
    ) -> Result<(), ServerError> {
        self.server().broadcast(
            src.map(Handle::binding),
            dst.binding(),
            self.stream,
            root,
            devices.to_vec(),
        )
    }

    /// Sends chunk r of `src` to rank r; chunk r of `dst` comes from rank r.
    pub fn all_to_all(
        &self,
        src: &Handle,
        dst: &Handle,
        devices: &[DeviceId],
    ) -> Result<(), ServerError> {
        self.server()
            .all_to_all(src.binding(), dst.binding(), self.stream, devices.to_vec())
    }

    /// Sends `src` to device `to`, which [`recv`](Self::recv)s it.
    pub fn send(&self, src: &Handle, to: DeviceId) -> Result<(), ServerError> {
        self.server().send(src.copy_descriptor(), self.stream, to)
    }

    /// Receives into `dst` what device `from` [`send`](Self::send)s.
    pub fn recv(&self, dst: &Handle, from: DeviceId) -> Result<(), ServerError> {
        self.server().recv(dst.clone(), self.stream, from)
    }

    /// Waits until every collective queued on the stream has its result in
    /// place (what `ComputeWait::Overlap` calls need before their result is
    /// used).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let devices = [DeviceId(30), DeviceId(31)];
    /// let clients = devices
    ///     .iter()
    ///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let mut maxes = Vec::new();
    /// for (rank, c) in clients.iter().enumerate() {
    ///     c.comm_init(&devices)?;
    ///     let src = c.create_from_slice(&[rank as i32 - 5, 7])?;
    ///     let dst = c.empty(8)?;
    ///     // Overlap: later work on the stream does not wait for the result...
    ///     c.all_reduce(&src, &dst, Reduction::max(DType::I32), &devices, ComputeWait::Overlap)?;
    ///     maxes.push(dst);
    /// }
    /// for (c, dst) in clients.iter().zip(&maxes) {
    ///     c.sync_collective()?; // ...so wait for it before using it.
    ///     assert_eq!(c.read_vec::<i32>(dst)?, [-4, 7]);
    /// }
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn sync_collective(&self) -> Result<(), ServerError> {
        self.server().sync_collective(self.stream)
    }
}
