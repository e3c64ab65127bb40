//! Graphs through a client: prepare, capture, replay, destroy.

use super::ComputeClient;
use crate::{GraphId, Server, ServerError};

impl<S: Server> ComputeClient<S> {
    /// Prepares the stream for a capture: call it, run the work once (the
    /// warm-up: kernels compile, memory settles), then
    /// [`capture`](Self::capture) it.
    pub fn graph_prepare(&self) -> Result<(), ServerError> {
        self.server().graph_prepare(self.stream)
    }

    /// Starts recording the stream's launches into a graph (they do not
    /// run). Host writes and reads are refused until
    /// [`end_capture`](Self::end_capture).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let copy = WgslKernel::new(
    ///     "copy",
    ///     "@group(0) @binding(0) var<storage, read> a: array<f32>;
    ///      @group(0) @binding(1) var<storage, read_write> b: array<f32>;
    ///      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    ///          if (id.x < arrayLength(&b)) { b[id.x] = a[id.x]; }
    ///      }",
    ///     "main",
    ///     [64, 1, 1],
    ///     vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    /// );
    /// let (a, b) = (client.create_from_slice(&[1.0f32; 64])?, client.empty(256)?);
    /// let step = || client.launch(copy.clone(), CubeCount::x(1), KernelArguments::handles([&a, &b]));
    /// client.graph_prepare()?;
    /// step()?; // warm-up
    /// client.begin_capture()?;
    /// step()?; // recorded, not run
    /// assert!(client.write_from_slice(&a, &[0.0f32; 64]).is_err()); // no host writes in a capture
    /// let graph = client.end_capture()?;
    /// client.write_from_slice(&a, &[9.0f32; 64])?; // a new input...
    /// client.replay(graph)?; // ...and the recorded launch again
    /// assert_eq!(client.read_vec::<f32>(&b)?, [9.0; 64]);
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn begin_capture(&self) -> Result<(), ServerError> {
        self.server().begin_capture(self.stream)
    }

    /// Stops recording and returns the graph.
    pub fn end_capture(&self) -> Result<GraphId, ServerError> {
        self.server().end_capture(self.stream)
    }

    /// Records the launches `work` makes into a graph: `begin_capture`,
    /// `work`, `end_capture`. When `work` fails the capture is ended and
    /// dropped, and its error returned.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let k = KernelBuilder::new("inc", [64, 1, 1]);
    /// let x = k.output(Scalar::U32);
    /// let gid = k.global_id();
    /// let i = k.x(gid);
    /// let v = k.load(x, i);
    /// let one = k.u32(1);
    /// let v = k.add(v, one);
    /// k.store(x, i, v);
    /// let inc = k.build()?;
    ///
    /// let data = client.create_from_slice(&[0u32; 64])?;
    /// let step = || client.launch(inc.clone(), CubeCount::x(1), KernelArguments::handles([&data]));
    /// client.graph_prepare()?;
    /// step()?; // warm-up: compiles, runs once
    /// let graph = client.capture(step)?;
    /// client.replay(graph)?;
    /// client.replay(graph)?;
    /// assert_eq!(client.read_vec::<u32>(&data)?, [3; 64]);
    /// client.graph_destroy(graph);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capture(
        &self,
        work: impl FnOnce() -> Result<(), ServerError>,
    ) -> Result<GraphId, ServerError> {
        self.begin_capture()?;
        let recorded = work();
        let graph = self.end_capture();
        match (recorded, graph) {
            (Ok(()), graph) => graph,
            (Err(e), Ok(graph)) => {
                self.graph_destroy(graph);
                Err(e)
            }
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// Replays a graph on the stream, against the buffers it was captured
    /// with (write new inputs into them first).
    pub fn replay(&self, graph: GraphId) -> Result<(), ServerError> {
        self.server().replay(graph, self.stream)
    }

    /// Releases a graph and the buffers it kept alive.
    pub fn graph_destroy(&self, graph: GraphId) {
        self.server().graph_destroy(graph, self.stream);
    }
}
