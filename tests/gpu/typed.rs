//! Typed buffers: a slice created from typed values (or `empty_of`) knows
//! its element type; a launch binding it where the kernel's module declares
//! another type is refused before anything is enqueued, and typed host
//! calls as another type are refused. Untyped slices (`empty`, `create`)
//! bind anywhere, except that the client follows what they were last
//! written as: a read-only binding or a typed read as another type is
//! refused until something writes them as that type.

use compute_runtime::{LaunchMode, Server};
use wgpu_server::prelude::*;

fn client() -> DefaultClient {
    WgpuServerOptions::new().client().expect("adapter")
}

/// `x[i] = x[i] * 2.0` over f32.
fn scale() -> Kernel {
    let k = KernelBuilder::new("scale", [4, 1, 1]);
    let x = k.output(Scalar::F32);
    let i = k.x(k.global_id());
    k.store(x, i, k.mul(k.load(x, i), 2.0f32));
    k.build().expect("kernel")
}

fn binding_type(e: &ServerError) -> (u32, DType, DType) {
    match e.root_cause() {
        ServerError::BindingType {
            kernel,
            binding,
            declared,
            holds,
            ..
        } => {
            assert_eq!(kernel, "scale", "{e}");
            (*binding, *declared, *holds)
        }
        other => panic!("expected BindingType, got {other}"),
    }
}

#[test]
fn a_u32_buffer_bound_to_an_f32_kernel_is_refused_and_left_untouched() {
    let c = client();
    let ids = c.create_from_slice(&[1u32, 2, 3, 4]).expect("ids");
    let e = c
        .launch(scale(), CubeCount::x(1), KernelArguments::handles([&ids]))
        .expect_err("refused");
    assert_eq!(binding_type(&e), (0, DType::F32, DType::U32));
    assert_eq!(c.read_vec::<u32>(&ids).expect("untouched"), [1, 2, 3, 4]);
    c.sync().expect("nothing was enqueued");
}

/// The server's own launch path refuses it too, and (as for any launch it
/// refuses) poisons what the launch would have written.
#[test]
fn the_raw_launch_path_refuses_it_and_poisons_the_write_set() {
    let c = client();
    let ids = c.create_from_slice(&[1u32, 2, 3, 4]).expect("ids");
    // SAFETY: refused before it is encoded.
    unsafe {
        c.server().launch(
            Box::new(scale()),
            CubeCount::x(1),
            KernelArguments::handles([&ids]),
            c.stream(),
            LaunchMode::Execute,
        )
    };
    binding_type(&c.check(&[&ids]).expect_err("poisoned"));
}

#[test]
fn a_wgsl_kernel_is_checked_against_what_its_module_declares() {
    let c = client();
    let k = WgslKernel::new(
        "scale",
        "@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
         @compute @workgroup_size(1) fn main() { x[0] = x[0] * 2.0; }",
        "main",
        [1, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let floats = c.create_from_slice(&[1.0f32; 4]).expect("f32");
    c.launch(
        k.clone(),
        CubeCount::x(1),
        KernelArguments::handles([&floats]),
    )
    .expect("vec4<f32> over an f32 slice");
    assert_eq!(c.read_vec::<f32>(&floats).expect("read"), [2.0; 4]);
    let ints = c.create_from_slice(&[1i32; 4]).expect("i32");
    let e = c
        .launch(k, CubeCount::x(1), KernelArguments::handles([&ints]))
        .expect_err("refused");
    assert_eq!(binding_type(&e), (0, DType::F32, DType::I32));
}

#[test]
fn untyped_slices_bind_anywhere() {
    let c = client();
    let raw = c.create(1.5f32.to_le_bytes().repeat(4)).expect("bytes");
    assert_eq!(raw.elem(), None);
    c.launch(scale(), CubeCount::x(1), KernelArguments::handles([&raw]))
        .expect("untyped");
    assert_eq!(c.read_vec::<f32>(&raw).expect("read"), [3.0; 4]);
}

#[test]
fn typed_host_calls_as_another_type_are_refused_and_touch_nothing() {
    let c = client();
    let x = c.empty_of::<f32>(4).expect("x");
    c.write_from_slice(&x, &[1.0f32; 4]).expect("write");
    let e = c.write_from_slice(&x, &[7u32; 4]).expect_err("refused");
    assert!(
        matches!(
            e,
            ServerError::ElementType {
                holds: DType::F32,
                asked: DType::U32,
                ..
            }
        ),
        "{e}"
    );
    assert!(c.read_vec::<i32>(&x).is_err());
    assert_eq!(c.read_vec::<f32>(&x).expect("untouched"), [1.0; 4]);
    assert_eq!(c.read_vec::<u8>(&x).expect("bytes").len(), 16);
    c.sync().expect("nothing failed");
}

/// `x[i] = i` as u32 (a kernel that writes an untyped buffer as u32).
fn iota() -> Kernel {
    let k = KernelBuilder::new("iota", [4, 1, 1]);
    let x = k.output(Scalar::U32);
    let i = k.x(k.global_id());
    k.store(x, i, i);
    k.build().expect("kernel")
}

/// `out[i] = x[i] + 1.0` over f32: reads `x` as f32.
fn add_one() -> Kernel {
    let k = KernelBuilder::new("add_one", [4, 1, 1]);
    let (x, out) = (k.input(Scalar::F32), k.output(Scalar::F32));
    let i = k.x(k.global_id());
    k.store(out, i, k.add(k.load(x, i), 1.0f32));
    k.build().expect("kernel")
}

#[test]
fn an_untyped_buffer_written_as_u32_is_not_read_as_f32() {
    let c = client();
    let raw = c.empty(16).expect("untyped");
    let out = c.empty_of::<f32>(4).expect("out");
    iota().launch(&c, 4, [&raw], &[]).expect("written as u32");
    let e = add_one()
        .launch(&c, 4, [&raw, &out], &[])
        .expect_err("read as f32");
    match e.root_cause() {
        ServerError::BindingType {
            kernel,
            binding: 0,
            declared: DType::F32,
            holds: DType::U32,
            ..
        } => assert_eq!(kernel, "add_one"),
        other => panic!("expected BindingType, got {other}"),
    }
    assert!(c.read_vec::<f32>(&raw).is_err(), "nor by a typed read");
    assert_eq!(c.read_vec::<u32>(&raw).expect("as u32"), [0, 1, 2, 3]);
    // Written again as f32 (a scratch buffer reused), it reads as f32.
    c.write_from_slice(&raw, &[0.5f32; 4]).expect("rewritten");
    add_one().launch(&c, 4, [&raw, &out], &[]).expect("f32 now");
    assert_eq!(c.read_vec::<f32>(&out).expect("out"), [1.5; 4]);
}

#[test]
fn slices_made_through_the_server_trait_are_not_followed() {
    let c = client();
    let memory = compute_runtime::ManagedMemoryHandle::new();
    c.server()
        .initialize_memory(memory.clone(), 16, c.stream())
        .expect("slice");
    let raw = Handle::new(memory, 16);
    let out = c.empty_of::<f32>(4).expect("out");
    iota().launch(&c, 4, [&raw], &[]).expect("written as u32");
    // A runtime above the server may reinterpret its bytes on purpose.
    add_one()
        .launch(&c, 4, [&raw, &out], &[])
        .expect("not followed");
    assert_eq!(raw.memory.written_as(), None);
}
