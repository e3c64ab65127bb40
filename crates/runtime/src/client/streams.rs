//! Ordering and timing through a client: flush, sync, profile windows.

use std::time::Duration;

use super::ComputeClient;
use crate::{ProfileError, ProfilingToken, Server, ServerError};

/// Drops a profile window if the closure measured in it panics.
struct AbandonOnUnwind<'a, S: Server> {
    client: &'a ComputeClient<S>,
    token: Option<ProfilingToken>,
}

impl<S: Server> Drop for AbandonOnUnwind<'_, S> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.client
                .server()
                .abandon_profile(self.client.stream, token);
        }
    }
}

impl<S: Server> ComputeClient<S> {
    /// Submits the stream's pending work and reports an enqueue-time failure
    /// of it not reported yet, without waiting for the GPU.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.create_from_slice(&[0u32; 4])?;
    /// let bad = WgslKernel::new(
    ///     "bad",
    ///     "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
    ///      @compute @workgroup_size(1) fn main() { x[0] = 1.0; }",
    ///     "main",
    ///     [1, 1, 1],
    ///     vec![BindingAccess::ReadWrite],
    /// );
    /// // SAFETY: it does not compile, so it never runs.
    /// unsafe { client.server().launch(Box::new(bad), CubeCount::x(1), KernelArguments::handles([&x]), client.stream(), LaunchMode::Execute) };
    /// // The raw launch returned nothing; the stream's next flush reports it, once.
    /// assert!(matches!(client.flush(), Err(ServerError::Deferred { .. })));
    /// client.flush()?;
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn flush(&self) -> Result<(), ServerError> {
        self.server().flush(self.stream)
    }

    /// Waits until the stream's work has run and reports what failed on it
    /// (the first failure not reported yet, or a device fault).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let _x = client.create_from_slice(&[1u8; 256])?;
    /// client.flush()?; // submitted, not waited for
    /// client.sync()?;  // done
    /// # Ok::<(), ServerError>(())
    /// ```
    pub fn sync(&self) -> Result<(), ServerError> {
        let future = self.server().sync(Vec::new(), self.stream);
        futures::executor::block_on(future)
    }

    /// Opens a profile window on the stream: close it with
    /// [`end_profile`](Self::end_profile). Windows nest.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.empty(1 << 16)?;
    /// let outer = client.start_profile()?;
    /// let inner = client.start_profile()?;
    /// client.write(&x, vec![1u8; 1 << 16])?;
    /// let write = client.end_profile(inner)?;
    /// client.write(&x, vec![2u8; 1 << 16])?;
    /// let both = client.end_profile(outer)?;
    /// println!("one write {write:?}, two writes {both:?}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_profile(&self) -> Result<ProfilingToken, ServerError> {
        self.server().start_profile(self.stream)
    }

    /// Closes a window and waits for its duration: the GPU time (or, with
    /// `TimingMethod::System`, the wall time) of the work enqueued on the
    /// stream inside it.
    pub fn end_profile(&self, token: ProfilingToken) -> Result<Duration, ProfileError> {
        let duration = self.server().end_profile(self.stream, token)?;
        futures::executor::block_on(duration.resolve())
    }

    /// Runs `work` inside a profile window and returns its result with the
    /// window's duration. A window whose work failed is
    /// [`ProfileError::Invalidated`].
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let x = client.empty(1 << 20)?;
    /// let (bytes, took) = client.profile(|| client.write(&x, vec![0u8; 1 << 20]))?;
    /// bytes?;
    /// println!("1 MiB written in {took:?}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn profile<R>(&self, work: impl FnOnce() -> R) -> Result<(R, Duration), ProfileError> {
        let token = self.start_profile()?;
        let mut guard = AbandonOnUnwind {
            client: self,
            token: Some(token),
        };
        let out = work();
        let token =
            guard
                .token
                .take()
                .ok_or(ProfileError::Server(ServerError::InvalidArgument {
                    reason: "profile window lost".into(),
                }))?;
        let duration = self.end_profile(token)?;
        Ok((out, duration))
    }
}
