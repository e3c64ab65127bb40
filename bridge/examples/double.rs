//! A cubecl kernel on this server: the program docs/cubecl.md shows,
//! run by `cargo xtask cubecl` (`cargo run --example double` in `bridge/`).

use cubecl_bridge::BridgeRuntime;
use cubecl_core as cubecl;
use cubecl_core::prelude::*;
use cubecl_runtime::runtime::Runtime;

#[cube(launch)]
fn double(input: &[f32], output: &mut [f32]) {
    if ABSOLUTE_POS < input.len() {
        output[ABSOLUTE_POS] = input[ABSOLUTE_POS] * 2.0;
    }
}

fn main() {
    let client = BridgeRuntime::client(&Default::default()); // the default adapter
    let input = client.create_from_slice(f32::as_bytes(&[1.0, 2.0, 3.0, 4.0]));
    let output = client.empty(4 * 4);
    double::launch(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(4),
        unsafe { BufferArg::from_raw_parts(input, 4) },
        unsafe { BufferArg::from_raw_parts(output.clone(), 4) },
    );
    let bytes = client.read_one(output).expect("the launch ran");
    assert_eq!(f32::from_bytes(&bytes), [2.0, 4.0, 6.0, 8.0]);
    println!("double: {:?}", f32::from_bytes(&bytes));
}
