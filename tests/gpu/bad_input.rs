//! Bad input gets a precise error, and nothing else changes: every case
//! checks that a bystander buffer still reads back intact.

use crate::common::*;
use compute_runtime::{
    BufferBinding, Bytes, CopyDescriptor, CubeCount, Handle, KernelArguments, LaunchMode,
    ManagedMemoryHandle, Server, ServerError,
};
use wgpu_server::{BindingAccess, WgslKernel};

struct Fixture {
    s: TestServer,
    bystander: Handle,
    expected: Vec<u32>,
}

fn fixture() -> Fixture {
    let mut s = server();
    let expected: Vec<u32> = (0..1024).map(|i| i * 3 + 1).collect();
    let bystander = upload(&mut s, u32_bytes(&expected), S0);
    Fixture {
        s,
        bystander,
        expected,
    }
}

impl Fixture {
    fn assert_intact(&mut self) {
        let got = bytes_u32(&read(&mut self.s, &self.bystander, S0).expect("bystander read"));
        assert_eq!(got, self.expected, "bystander corrupted");
        self.s
            .check(vec![self.bystander.binding()], S0)
            .expect("bystander trusted");
    }
}

#[test]
fn read_of_an_uninitialized_handle_is_unknown_handle() {
    let mut f = fixture();
    let stranger = Handle::new(ManagedMemoryHandle::new(), 16);
    let err = read(&mut f.s, &stranger, S0).expect_err("unknown");
    assert!(matches!(err, ServerError::UnknownHandle { .. }), "{err}");
    f.assert_intact();
}

#[test]
fn handle_of_another_server_is_unknown_here() {
    let mut f = fixture();
    let mut other = server();
    let foreign = upload(&mut other, u32_bytes(&[1, 2, 3, 4]), S0);
    let err = read(&mut f.s, &foreign, S0).expect_err("foreign");
    assert!(matches!(err, ServerError::UnknownHandle { .. }), "{err}");
    // And a write of it is reported by the stream's next flush.
    f.s.write(
        vec![(foreign.copy_descriptor(), u32_bytes(&[0; 4]).into())],
        S0,
    );
    let err = f.s.flush(S0).expect_err("deferred");
    assert!(
        matches!(err.root_cause(), ServerError::UnknownHandle { .. }),
        "{err}"
    );
    f.assert_intact();
}

#[test]
fn write_of_an_uninitialized_handle_is_reported_by_flush_and_sync() {
    let mut f = fixture();
    let stranger = Handle::new(ManagedMemoryHandle::new(), 16);
    f.s.write(
        vec![(stranger.copy_descriptor(), u32_bytes(&[7; 4]).into())],
        S0,
    );
    let err = sync(&mut f.s, S0).expect_err("reported");
    assert!(
        matches!(err.root_cause(), ServerError::UnknownHandle { .. }),
        "{err}"
    );
    sync(&mut f.s, S0).expect("reported once");
    f.assert_intact();
}

#[test]
fn out_of_bounds_descriptors_are_refused() {
    let mut f = fixture();
    let h = upload(&mut f.s, u32_bytes(&[5; 16]), S0);
    let past_end = BufferBinding {
        memory: h.memory.clone(),
        offset: 32,
        size: 64,
    };
    let err = read_desc(&mut f.s, CopyDescriptor::contiguous(past_end.clone()), S0)
        .expect_err("oob read");
    assert!(
        matches!(err, ServerError::OutOfBounds { capacity: 64, .. }),
        "{err}"
    );
    f.s.write(
        vec![(
            CopyDescriptor::contiguous(past_end),
            u32_bytes(&[9; 16]).into(),
        )],
        S0,
    );
    let err = f.s.flush(S0).expect_err("oob write");
    assert!(
        matches!(err.root_cause(), ServerError::OutOfBounds { .. }),
        "{err}"
    );
    let overflow = BufferBinding {
        memory: h.memory.clone(),
        offset: u64::MAX - 2,
        size: 8,
    };
    let err = read_desc(&mut f.s, CopyDescriptor::contiguous(overflow), S0).expect_err("overflow");
    assert!(matches!(err, ServerError::OutOfBounds { .. }), "{err}");
    f.assert_intact();
}

#[test]
fn size_mismatch_between_descriptor_and_data_is_refused_and_leaves_the_target_trusted() {
    let mut f = fixture();
    let h = upload(&mut f.s, u32_bytes(&[5; 16]), S0);
    f.s.write(vec![(h.copy_descriptor(), u32_bytes(&[1; 8]).into())], S0);
    let err = f.s.flush(S0).expect_err("mismatch");
    assert!(
        matches!(
            err.root_cause(),
            ServerError::SizeMismatch {
                expected: 64,
                actual: 32
            }
        ),
        "{err}"
    );
    // Refused at the call: no byte of the target moved, so it stays
    // trusted and holds what it held.
    f.s.check(vec![h.binding()], S0).expect("still trusted");
    assert_eq!(
        bytes_u32(&read(&mut f.s, &h, S0).expect("untouched")),
        vec![5; 16]
    );
    // So are the other refusals at the call: a misaligned range, a range
    // past the end.
    let misaligned = BufferBinding {
        memory: h.memory.clone(),
        offset: 2,
        size: 4,
    };
    let past_end = BufferBinding {
        memory: h.memory.clone(),
        offset: 32,
        size: 64,
    };
    for binding in [misaligned, past_end] {
        let data = vec![0u8; binding.size as usize].into();
        f.s.write(vec![(CopyDescriptor::contiguous(binding), data)], S0);
        f.s.flush(S0).expect_err("refused");
        f.s.check(vec![h.binding()], S0).expect("still trusted");
    }
    // A descriptor whose shape disagrees with its binding is refused too.
    let mut d = h.copy_descriptor();
    d.shape = vec![17];
    d.strides = vec![1];
    d.elem_size = 4;
    let err = read_desc(&mut f.s, d, S0).expect_err("shape");
    assert!(matches!(err, ServerError::SizeMismatch { .. }), "{err}");
    // A full overwrite restores trust.
    f.s.write(vec![(h.copy_descriptor(), u32_bytes(&[2; 16]).into())], S0);
    assert_eq!(
        bytes_u32(&read(&mut f.s, &h, S0).expect("trusted again")),
        vec![2; 16]
    );
    f.assert_intact();
}

#[test]
fn kernel_that_does_not_compile_is_a_compilation_error_that_poisons_its_writes() {
    let mut f = fixture();
    let input = upload(&mut f.s, u32_bytes(&[1; 64]), S0);
    let out = upload(&mut f.s, u32_bytes(&[0; 64]), S0);
    let broken = WgslKernel::new(
        "broken",
        "@group(0) @binding(0) var<storage, read> x: array<u32>;\n\
         @group(0) @binding(1) var<storage, read_write> y: array<u32>;\n\
         @compute @workgroup_size(64) fn main() { y[0] = x[0] + 1.5; }",
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadOnly, BindingAccess::ReadWrite],
    );
    launch(&mut f.s, broken, CubeCount::x(1), &[&input, &out], S0);
    let err = f.s.check(vec![out.binding()], S0).expect_err("poisoned");
    let ServerError::Untrusted { cause, .. } = &err else {
        panic!("expected Untrusted, got {err}");
    };
    let ServerError::Compilation { kernel, diagnostic } = cause.as_ref() else {
        panic!("expected Compilation, got {cause}");
    };
    assert_eq!(kernel, "broken");
    assert!(!diagnostic.is_empty());
    // The read-only input is not in the write set.
    f.s.check(vec![input.binding()], S0).expect("input trusted");
    assert!(f.s.flush(S0).is_err(), "deferred to flush");
    assert_eq!(f.s.failure_count(), 1);
    f.assert_intact();
}

#[test]
fn dispatch_over_the_adapter_limits_is_refused_before_wgpu_sees_it() {
    let mut f = fixture();
    let h = upload(&mut f.s, u32_bytes(&[0; 64]), S0);
    let max = f.s.device().limits().max_compute_workgroups_per_dimension;
    launch(
        &mut f.s,
        inc_kernel(),
        CubeCount::Static(max + 1, 1, 1),
        &[&h],
        S0,
    );
    let err = f.s.flush(S0).expect_err("over limit");
    assert!(
        matches!(
            err.root_cause(),
            ServerError::LimitExceeded {
                limit: "max_compute_workgroups_per_dimension",
                ..
            }
        ),
        "{err}"
    );
    // Workgroup size over the device limit.
    let too_wide = WgslKernel::new(
        "too_wide",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
         @compute @workgroup_size(4096) fn main() { x[0] = 1u; }",
        "main",
        [4096, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    launch(&mut f.s, too_wide, CubeCount::x(1), &[&h], S0);
    let err = f.s.flush(S0).expect_err("too wide");
    assert!(
        matches!(err.root_cause(), ServerError::LimitExceeded { .. }),
        "{err}"
    );
    // The batch the refused launches would have joined still runs. (A
    // launch never trusts its output again, so `h` is rewritten whole
    // first; an `inc` of untrusted bytes would itself be refused.)
    f.s.write(vec![(h.copy_descriptor(), Bytes::from(vec![0u8; 256]))], S0);
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&h], S0);
    assert_eq!(
        bytes_u32(&read(&mut f.s, &h, S0).expect("read")),
        vec![1; 64]
    );
    f.assert_intact();
}

#[test]
fn wrong_argument_count_and_foreign_kernels_are_refused() {
    let mut f = fixture();
    let h = upload(&mut f.s, u32_bytes(&[0; 64]), S0);
    launch(&mut f.s, add_kernel(), CubeCount::x(1), &[&h], S0);
    let err = f.s.flush(S0).expect_err("arity");
    assert!(
        matches!(err.root_cause(), ServerError::InvalidArgument { .. }),
        "{err}"
    );

    #[derive(Debug)]
    struct Alien;
    impl compute_runtime::CubeKernel for Alien {
        fn id(&self) -> compute_runtime::KernelId {
            compute_runtime::KernelId(1)
        }
        fn name(&self) -> &str {
            "alien"
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }
    // SAFETY: the kernel is refused before anything runs.
    unsafe {
        f.s.launch(
            Box::new(Alien),
            CubeCount::x(1),
            KernelArguments::buffers(vec![h.binding()]),
            S0,
            LaunchMode::Execute,
        )
    };
    let err = f.s.flush(S0).expect_err("foreign");
    assert!(
        matches!(err.root_cause(), ServerError::ForeignKernel { .. }),
        "{err}"
    );
    f.assert_intact();
}

#[test]
fn unaligned_partial_writes_are_refused_not_clobbering_neighbours() {
    let mut f = fixture();
    let h = upload(&mut f.s, Vec::from([1u8; 12]), S0);
    let mid = BufferBinding {
        memory: h.memory.clone(),
        offset: 2,
        size: 3,
    };
    f.s.write(
        vec![(CopyDescriptor::contiguous(mid), Vec::from([9u8; 3]).into())],
        S0,
    );
    let err = f.s.flush(S0).expect_err("unaligned");
    assert!(
        matches!(err.root_cause(), ServerError::InvalidArgument { .. }),
        "{err}"
    );
    f.assert_intact();
}

#[test]
fn zero_size_and_oversized_reservations_are_refused() {
    let mut f = fixture();
    let m = ManagedMemoryHandle::new();
    let err = f.s.initialize_memory(m.clone(), 0, S0).expect_err("zero");
    assert!(matches!(err, ServerError::InvalidArgument { .. }), "{err}");
    let max = f.s.device().limits().max_buffer_size;
    let err =
        f.s.initialize_memory(m.clone(), max + 1, S0)
            .expect_err("huge");
    assert!(matches!(err, ServerError::LimitExceeded { .. }), "{err}");
    f.s.initialize_memory(m.clone(), 64, S0).expect("then fine");
    let err = f.s.initialize_memory(m, 64, S0).expect_err("twice");
    assert!(
        matches!(err, ServerError::AlreadyInitialized { .. }),
        "{err}"
    );
    f.assert_intact();
}

#[test]
fn unsupported_capabilities_say_so() {
    let mut f = fixture();
    // Strided (non-contiguous) transfers are not built: refused by name.
    let h = alloc(&mut f.s, 64, S0);
    let strided = CopyDescriptor {
        binding: h.binding(),
        shape: vec![4, 4],
        strides: vec![8, 1],
        elem_size: 4,
    };
    let err = futures::executor::block_on(f.s.read(vec![strided], S0)).expect_err("strided");
    assert!(
        matches!(
            err,
            ServerError::Unsupported {
                what: "strided transfer",
                ..
            }
        ),
        "{err}"
    );
    // Collectives are built: a communicator of this device alone works.
    use compute_runtime::ServerCommunication;
    f.s.comm_init(vec![compute_runtime::DeviceId(0)])
        .expect("a one-rank communicator");
    f.assert_intact();
}
