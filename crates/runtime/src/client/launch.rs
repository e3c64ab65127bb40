//! Launches through a client, checked at the call against the kernel.

use std::sync::Arc;

use super::ComputeClient;
use crate::{
    AccessChecks, CubeCount, CubeKernel, KernelArguments, LaunchMode, LaunchValidation, ServerError,
};

impl<S: LaunchValidation> ComputeClient<S> {
    /// Checks a launch, wrapping what is wrong in [`ServerError::Launch`].
    fn validate(
        &self,
        server: &mut S,
        kernel: &dyn CubeKernel,
        count: &CubeCount,
        args: &KernelArguments,
    ) -> Result<AccessChecks, ServerError> {
        server
            .validate_launch(kernel, count, args, self.stream)
            .map_err(|cause| ServerError::Launch {
                kernel: kernel.name().to_string(),
                cause: Arc::new(cause),
            })
    }

    /// Launches a kernel whose memory accesses are bounds-checked (the
    /// default for IR and WGSL kernels). The launch is checked first:
    /// arguments that do not fit the kernel (buffer count, scalars, a
    /// binding smaller than the kernel needs, an unknown or out-of-bounds
    /// handle, a count over the device's limits), a kernel that does not
    /// compile, or one compiled without bounds checks, are a
    /// [`ServerError::Launch`] naming the kernel, and nothing is enqueued.
    /// Failures only the device can see are reported as usual: by `check`,
    /// `read` and `sync` of what it wrote.
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let k = KernelBuilder::new("double", [64, 1, 1]);
    /// let x = k.output(Scalar::F32);
    /// let n = k.scalar_arg(Scalar::U32);
    /// let gid = k.global_id();
    /// let i = k.x(gid);
    /// let inside = k.lt(i, n);
    /// k.if_(inside, |k| {
    ///     let v = k.load(x, i);
    ///     let v = k.add(v, v);
    ///     k.store(x, i, v);
    /// });
    /// let double = k.build()?;
    ///
    /// let data = client.create_from_slice(&[1.0f32, 2.0, 3.0])?;
    /// let args = KernelArguments::handles([&data]).with_scalars(double.pack_scalars(&[Lit::U32(3)])?);
    /// client.launch(double.clone(), CubeCount::x(1), args)?;
    /// assert_eq!(client.read_vec::<f32>(&data)?, [2.0, 4.0, 6.0]);
    ///
    /// // Two buffers for a kernel of one: refused at the call, by name.
    /// let err = client
    ///     .launch(double, CubeCount::x(1), KernelArguments::handles([&data, &data]))
    ///     .unwrap_err();
    /// assert!(err.to_string().starts_with("launch of `double`"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn launch(
        &self,
        kernel: impl CubeKernel,
        count: CubeCount,
        args: KernelArguments,
    ) -> Result<(), ServerError> {
        let mut server = self.server();
        match self.validate(&mut server, &kernel, &count, &args)? {
            AccessChecks::Checked => {}
            AccessChecks::Unchecked => {
                return Err(ServerError::Launch {
                    kernel: kernel.name().to_string(),
                    cause: Arc::new(ServerError::InvalidArgument {
                        reason: "the kernel is compiled without run-time bounds checks \
                                 (BoundsChecks::Unchecked), so launching it is unsafe: use \
                                 `launch_unchecked`"
                            .into(),
                    }),
                });
            }
        }
        // SAFETY: the server vouched (`LaunchValidation` is an unsafe
        // trait) that this launch's accesses are checked at run time.
        unsafe {
            server.launch(
                Box::new(kernel),
                count,
                args,
                self.stream,
                LaunchMode::Execute,
            );
        }
        Ok(())
    }

    /// Launches any kernel, bounds-checked or not, with the same checks of
    /// its arguments as [`launch`](Self::launch).
    ///
    /// ```
    /// use wgpu_server::prelude::*;
    ///
    /// let client = WgpuServerOptions::new().client()?;
    /// let fill = WgslKernel::new(
    ///     "fill",
    ///     "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
    ///      @compute @workgroup_size(4) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    ///          x[id.x] = 7u;
    ///      }",
    ///     "main",
    ///     [4, 1, 1],
    ///     vec![BindingAccess::ReadWrite],
    /// )
    /// .with_bounds_checks(BoundsChecks::Unchecked);
    /// let x = client.empty(16)?;
    /// // SAFETY: one workgroup of 4 invocations writes x[0..4], all inside x.
    /// unsafe { client.launch_unchecked(fill.clone(), CubeCount::x(1), KernelArguments::handles([&x]))? };
    /// assert_eq!(client.read_vec::<u32>(&x)?, [7; 4]);
    /// // The safe launch refuses it.
    /// assert!(client.launch(fill, CubeCount::x(1), KernelArguments::handles([&x])).is_err());
    /// # Ok::<(), ServerError>(())
    /// ```
    ///
    /// # Safety
    ///
    /// As [`Server::launch`](crate::Server::launch): a kernel compiled without bounds checks must
    /// not access memory outside its bindings.
    pub unsafe fn launch_unchecked(
        &self,
        kernel: impl CubeKernel,
        count: CubeCount,
        args: KernelArguments,
    ) -> Result<(), ServerError> {
        let mut server = self.server();
        self.validate(&mut server, &kernel, &count, &args)?;
        // SAFETY: forwarded contract.
        unsafe {
            server.launch(
                Box::new(kernel),
                count,
                args,
                self.stream,
                LaunchMode::Execute,
            );
        }
        Ok(())
    }
}
