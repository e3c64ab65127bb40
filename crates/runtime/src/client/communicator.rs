//! [`Communicator`]: one rank's collectives through its client, with the
//! device list named once and element types taken from typed handles.

use std::sync::Arc;

use super::ComputeClient;
use crate::{
    ComputeWait, DeviceId, Handle, ReduceOp, Reduction, Server, ServerCommunication, ServerError,
};

/// One rank of a communicator: what [`ComputeClient::communicator`]
/// returns. Every rank makes the same calls in the same order.
///
/// A call this rank refuses (an untyped buffer for a reduction, a root that
/// is not a rank, an operand the server refuses) still takes its place: it
/// returns the error here, and the other ranks' call fails too, naming this
/// rank ([`ServerError::CollectiveInput`]), so every rank's next call pairs
/// as usual.
///
/// What blocks: nothing here waits for the other ranks. A call is checked
/// and posted on the client's stream and returns; with the default
/// [`ComputeWait::Wait`], later work on that stream (a launch, a `read`)
/// runs after the result is in place, so the first `read` or `sync` of it
/// waits for every rank to join the call (or for the communicator's
/// timeout: wgpu-server's `WgpuServerOptions::collective_timeout`). An
/// [`overlapped`](Self::overlapped) communicator posts with
/// [`ComputeWait::Overlap`]: later work does not wait, and
/// [`sync`](Self::sync) waits for the results.
///
/// ```
/// use wgpu_server::prelude::*;
///
/// let devices = [DeviceId(40), DeviceId(41), DeviceId(42)];
/// let clients = devices
///     .iter()
///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
///     .collect::<Result<Vec<_>, _>>()?;
/// let mut grads = Vec::new();
/// for (rank, c) in clients.iter().enumerate() {
///     let comm = c.communicator(&devices)?;
///     let g = c.create_from_slice(&[rank as f32; 4])?; // typed: f32
///     comm.all_reduce(&g, ReduceOp::Mean)?; // in place, no dtype repeated
///     grads.push(g);
/// }
/// for (c, g) in clients.iter().zip(&grads) {
///     assert_eq!(c.read_vec::<f32>(g)?, [1.0; 4]); // (0 + 1 + 2) / 3
/// }
/// # Ok::<(), ServerError>(())
/// ```
#[derive(Debug)]
pub struct Communicator<S> {
    client: ComputeClient<S>,
    devices: Arc<[DeviceId]>,
    /// The client's device's index in `devices`.
    rank: usize,
    wait: ComputeWait,
}

/// Another handle on the same rank (its calls are this rank's calls: make
/// them in the same order on every rank).
impl<S> Clone for Communicator<S> {
    fn clone(&self) -> Self {
        Communicator {
            client: self.client.clone(),
            devices: Arc::clone(&self.devices),
            rank: self.rank,
            wait: self.wait,
        }
    }
}

impl<S: Server + ServerCommunication> ComputeClient<S> {
    /// Joins the communicator of `devices` (in rank order; this client's
    /// device among them) and returns this rank's handle on it. In one
    /// process it never blocks (the ranks may join from one thread in
    /// turn); across processes (MPI) it blocks until every rank joined.
    pub fn communicator(&self, devices: &[DeviceId]) -> Result<Communicator<S>, ServerError> {
        let Some(rank) = devices.iter().position(|d| *d == self.device()) else {
            return Err(ServerError::InvalidArgument {
                reason: format!("{} is not among the communicator's devices", self.device()),
            });
        };
        self.comm_init(devices)?;
        Ok(Communicator {
            client: self.clone(),
            devices: devices.into(),
            rank,
            wait: ComputeWait::Wait,
        })
    }
}

impl<S: Server + ServerCommunication> Communicator<S> {
    /// This communicator posting with [`ComputeWait::Overlap`]: later work
    /// on the stream does not wait for a result; [`sync`](Self::sync) does.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let devices = [DeviceId(70), DeviceId(71)];
    /// let clients = devices
    ///     .iter()
    ///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let mut posted = Vec::new();
    /// for (rank, c) in clients.iter().enumerate() {
    ///     let comm = c.communicator(&devices)?.overlapped();
    ///     let x = c.create_from_slice(&[rank as i64 + 1; 2])?;
    ///     comm.all_reduce(&x, ReduceOp::Prod)?; // returns at once
    ///     posted.push((comm, x));
    /// }
    /// for ((comm, x), c) in posted.iter().zip(&clients) {
    ///     comm.sync()?; // the result is in place once this returns
    ///     assert_eq!(c.read_vec::<i64>(x)?, [2, 2]);
    /// }
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn overlapped(mut self) -> Self {
        self.wait = ComputeWait::Overlap;
        self
    }

    /// This rank's index.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.devices.len()
    }

    /// The device of rank `rank`.
    pub fn device(&self, rank: usize) -> Result<DeviceId, ServerError> {
        self.devices
            .get(rank)
            .copied()
            .ok_or(ServerError::InvalidArgument {
                reason: format!("rank {rank} of a communicator of {}", self.devices.len()),
            })
    }

    /// Reduces every rank's `buf` element-wise, in place, with `op` over
    /// the handle's element type.
    pub fn all_reduce(&self, buf: &Handle, op: ReduceOp) -> Result<(), ServerError> {
        self.all_reduce_into(buf, buf, op)
    }

    /// Reduces every rank's `src` element-wise into every rank's `dst`.
    pub fn all_reduce_into(
        &self,
        src: &Handle,
        dst: &Handle,
        op: ReduceOp,
    ) -> Result<(), ServerError> {
        let reduction = self.or_refuse(reduction(op, src))?;
        self.client
            .all_reduce(src, dst, reduction, &self.devices, self.wait)
    }

    /// Writes every rank's `src`, concatenated in rank order, to `dst`.
    pub fn all_gather(&self, src: &Handle, dst: &Handle) -> Result<(), ServerError> {
        self.client.all_gather(src, dst, &self.devices)
    }

    /// Reduces every rank's `src` and writes this rank's chunk to `dst`.
    pub fn reduce_scatter(
        &self,
        src: &Handle,
        dst: &Handle,
        op: ReduceOp,
    ) -> Result<(), ServerError> {
        let reduction = self.or_refuse(reduction(op, src))?;
        self.client
            .reduce_scatter(src, dst, reduction, &self.devices)
    }

    /// Writes rank `root`'s `buf` to every rank's `buf`.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let devices = [DeviceId(72), DeviceId(73), DeviceId(74)];
    /// let mut ranks = Vec::new();
    /// for (rank, d) in devices.iter().enumerate() {
    ///     let c = WgpuServerOptions::new().device_id(*d).adapter(0).client()?;
    ///     let comm = c.communicator(&devices)?;
    ///     let seed = c.create_from_slice(&[rank as u32 * 10; 4])?;
    ///     comm.broadcast(&seed, 2)?; // rank 2's values everywhere
    ///     assert_eq!((comm.rank(), comm.size()), (rank, 3));
    ///     ranks.push((c, seed));
    /// }
    /// for (c, seed) in &ranks {
    ///     assert_eq!(c.read_vec::<u32>(seed)?, [20; 4]);
    /// }
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn broadcast(&self, buf: &Handle, root: usize) -> Result<(), ServerError> {
        let root_device = self.or_refuse(self.device(root))?;
        let src = (self.rank() == root).then_some(buf);
        self.client.broadcast(src, buf, root_device, &self.devices)
    }

    /// Sends chunk r of `src` to rank r; chunk r of `dst` comes from rank r.
    pub fn all_to_all(&self, src: &Handle, dst: &Handle) -> Result<(), ServerError> {
        self.client.all_to_all(src, dst, &self.devices)
    }

    /// Sends `src` to rank `to`, which [`recv`](Self::recv)s it. A `to`
    /// that is not a rank is refused here and takes no place: messages pair
    /// per (sender, receiver), and no rank receives from it.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let devices = [DeviceId(75), DeviceId(76)];
    /// let c: Vec<_> = devices
    ///     .iter()
    ///     .map(|d| WgpuServerOptions::new().device_id(*d).adapter(0).client())
    ///     .collect::<Result<_, _>>()?;
    /// let (a, b) = (c[0].communicator(&devices)?, c[1].communicator(&devices)?);
    /// let src = c[0].create_from_slice(&[1.5f32, 2.5])?;
    /// let dst = c[1].empty_of::<f32>(2)?;
    /// a.send(&src, 1)?;
    /// b.recv(&dst, 0)?;
    /// assert_eq!(c[1].read_vec::<f32>(&dst)?, [1.5, 2.5]);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn send(&self, src: &Handle, to: usize) -> Result<(), ServerError> {
        self.client.send(src, self.device(to)?)
    }

    /// Receives into `dst` what rank `from` [`send`](Self::send)s (a `from`
    /// that is not a rank is refused here and takes no place, as in
    /// [`send`](Self::send)).
    pub fn recv(&self, dst: &Handle, from: usize) -> Result<(), ServerError> {
        self.client.recv(dst, self.device(from)?)
    }

    /// Waits until every collective posted on the stream has its result in
    /// place, for any rank to join first (what an
    /// [`overlapped`](Self::overlapped) communicator's results need before
    /// they are used).
    pub fn sync(&self) -> Result<(), ServerError> {
        self.client.sync_collective()
    }

    /// `checked`, or, when this rank's check failed, the error after the
    /// call was posted as refused: the other ranks' call at its place fails
    /// too (naming this rank) instead of pairing with this rank's next one.
    fn or_refuse<T>(&self, checked: Result<T, ServerError>) -> Result<T, ServerError> {
        checked.map_err(|e| {
            self.client
                .server()
                .refuse_collective(e, self.devices.to_vec())
        })
    }
}

/// `op` over `h`'s own element type.
fn reduction(op: ReduceOp, h: &Handle) -> Result<Reduction, ServerError> {
    let elem = h.elem().ok_or(ServerError::InvalidArgument {
        reason: "a reduction needs the buffer's element type: create it typed \
                 (`create_from_slice`, `empty_of`), or call `ComputeClient::all_reduce` with a \
                 `Reduction`"
            .into(),
    })?;
    Ok(Reduction::new(op, elem))
}
