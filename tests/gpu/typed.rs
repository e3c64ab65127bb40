//! Typed buffers: a slice created from typed values (or `empty_of`) knows
//! its element type; a launch binding it where the kernel's module declares
//! another type is refused before anything is enqueued, and typed host
//! calls as another type are refused. Untyped slices (`empty`, `create`)
//! bind anywhere, as before.

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
