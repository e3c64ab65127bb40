//! burn programs and their checks, the same source built against this
//! server (the bridge workspace) and against upstream burn-wgpu.
