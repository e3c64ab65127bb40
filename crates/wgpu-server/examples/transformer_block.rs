//! One transformer block on the server, from IR kernels, checked against
//! the host: `y = x + attention(layernorm(x)) Wo`, with causal attention
//! over 4 heads (`q, k, v = ln Wq, ln Wk, ln Wv`, each head's
//! `softmax(q k^T / sqrt(d)) v` over the keys up to the query's position).
//!
//! The reductions (a row's mean and variance, a query's scores) are
//! `workgroup_reduce`; the matmuls launch over 2-D grids; every buffer's
//! length is declared, so a wrong shape is refused at the call.
//!
//! `cargo run -p wgpu-server --example transformer_block`.

use std::error::Error;

use wgpu_server::prelude::*;

/// Tokens, model width, heads and each head's width.
const S: u32 = 32;
const D: u32 = 64;
const H: u32 = 4;
const HD: u32 = D / H;

/// `out[r, :] = (x[r, :] - mean) / sqrt(var + 1e-5) * gamma + beta`: one
/// workgroup of `D` invocations per row (grid `[D, rows]`). Scalar `rows`.
fn layernorm() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("layernorm", [D, 1, 1]);
    let rows = k.scalar_arg(Scalar::U32);
    let x = k.input_len(Scalar::F32, k.mul(rows, D));
    let [gamma, beta] = [0; 2].map(|_| k.input_len(Scalar::F32, D));
    let out = k.output_len(Scalar::F32, k.mul(rows, D));
    let (c, at) = (
        k.x(k.local_id()),
        k.add(k.mul(k.y(k.global_id()), D), k.x(k.local_id())),
    );
    let v = k.load(x, at);
    let centred = k.sub(v, k.workgroup_reduce(ReduceOp::Mean, v));
    let var = k.workgroup_reduce(ReduceOp::Mean, k.mul(centred, centred));
    let norm = k.mul(centred, k.inverse_sqrt(k.add(var, 1e-5f32)));
    k.store(out, at, k.fma(norm, k.load(gamma, c), k.load(beta, c)));
    k.build()
}

/// `c = a b (+ r)` (`m x depth` by `depth x n`, row-major), one invocation
/// per element of `c` over an `[n, m]` grid. Scalars `m, n, depth`; with
/// `residual`, `r` is added (the block's skip connection).
fn matmul(residual: bool) -> Result<Kernel, IrError> {
    let k = KernelBuilder::new(if residual { "matmul_add" } else { "matmul" }, [8, 8, 1]);
    let [m, n, depth] = [0; 3].map(|_| k.scalar_arg(Scalar::U32));
    let a = k.input_len(Scalar::F32, k.mul(m, depth));
    let b = k.input_len(Scalar::F32, k.mul(depth, n));
    let r = residual.then(|| k.input_len(Scalar::F32, k.mul(m, n)));
    let c = k.output_len(Scalar::F32, k.mul(m, n));
    let (col, row) = (k.x(k.global_id()), k.y(k.global_id()));
    k.if_(k.and(k.lt(row, m), k.lt(col, n)), |k| {
        let acc = k.var(0.0f32);
        k.for_range(0u32, depth, |k, p| {
            let x = k.load(a, k.add(k.mul(row, depth), p));
            k.set(
                acc,
                k.fma(x, k.load(b, k.add(k.mul(p, n), col)), k.get(acc)),
            );
        });
        let at = k.add(k.mul(row, n), col);
        let sum = r.map_or(k.get(acc), |r| k.add(k.get(acc), k.load(r, at)));
        k.store(c, at, sum);
    });
    k.build()
}

/// Causal attention: one workgroup of `S` invocations (one per key) per
/// query and head (grid `[S, S, H]`); `q, k, v, out` are `S x D`, head `h`
/// in columns `h*HD..(h+1)*HD`.
fn attention() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("attention", [S, 1, 1]);
    let [q, keys, v] = [0; 3].map(|_| k.input_len(Scalar::F32, S * D));
    let out = k.output_len(Scalar::F32, S * D);
    let weights = k.shared(Scalar::F32, S);
    let (j, i, h) = (
        k.local_index(),
        k.y(k.workgroup_id()),
        k.z(k.workgroup_id()),
    );
    let head = |k: &KernelBuilder, row, d| k.add(k.add(k.mul(row, D), k.mul(h, HD)), d);
    let dot = k.var(0.0f32);
    k.for_range(0u32, HD, |k, d| {
        let qk = k.mul(k.load(q, head(k, i, d)), k.load(keys, head(k, j, d)));
        k.set(dot, k.add(k.get(dot), qk));
    });
    let visible = k.le(j, i);
    let score = k.select(
        visible,
        k.mul(k.get(dot), 1.0 / (HD as f32).sqrt()),
        f32::MIN,
    );
    let e = k.select(
        visible,
        k.exp(k.sub(score, k.workgroup_reduce(ReduceOp::Max, score))),
        0.0f32,
    );
    k.store(weights, j, k.div(e, k.workgroup_reduce(ReduceOp::Sum, e)));
    k.barrier();
    // Invocation d < HD sums the head's column d of v, weighted.
    k.if_(k.lt(j, HD), |k| {
        let acc = k.var(0.0f32);
        k.for_range(0u32, S, |k, key| {
            let wv = k.mul(k.load(weights, key), k.load(v, head(k, key, j)));
            k.set(acc, k.add(k.get(acc), wv));
        });
        k.store(out, head(k, i, j), k.get(acc));
    });
    k.build()
}

/// `len` values in [-0.5, 0.5), scattered by a multiplicative hash,
/// deterministic per `seed`.
fn values(len: u32, seed: u32) -> Vec<f32> {
    let hash = |i: u32| (i ^ seed.wrapping_mul(0x9e37_79b9)).wrapping_mul(0x85eb_ca6b) >> 8;
    (0..len)
        .map(|i| hash(i) as f32 / (1 << 24) as f32 - 0.5)
        .collect()
}

/// The block on the host, in f64.
fn host_block(x: &[f32], [wq, wk, wv, wo, gamma, beta]: &[Vec<f32>; 6]) -> Vec<f64> {
    let (s, d, hd) = (S as usize, D as usize, HD as usize);
    let f = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let (x, gamma, beta) = (f(x), f(gamma), f(beta));
    let mut ln = vec![0.0; s * d];
    for (r, row) in x.chunks(d).enumerate() {
        let mean = row.iter().sum::<f64>() / d as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
        for c in 0..d {
            ln[r * d + c] = (row[c] - mean) / (var + 1e-5).sqrt() * gamma[c] + beta[c];
        }
    }
    let mm = |a: &[f64], w: &[f32]| -> Vec<f64> {
        let dot = |r: usize, c: usize| (0..d).map(|p| a[r * d + p] * f64::from(w[p * d + c])).sum();
        (0..s * d).map(|i| dot(i / d, i % d)).collect()
    };
    let (q, k, v) = (mm(&ln, wq), mm(&ln, wk), mm(&ln, wv));
    let mut att = vec![0.0; s * d];
    for (h, i) in (0..H as usize).flat_map(|h| (0..s).map(move |i| (h, i))) {
        let col = |r: usize, c: usize| r * d + h * hd + c;
        let scores: Vec<f64> = (0..=i)
            .map(|j| (0..hd).map(|c| q[col(i, c)] * k[col(j, c)]).sum::<f64>() / (hd as f64).sqrt())
            .collect();
        let max = scores.iter().copied().fold(f64::MIN, f64::max);
        let e: Vec<f64> = scores.iter().map(|sc| (sc - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        for c in 0..hd {
            att[col(i, c)] = (0..=i).map(|j| e[j] / sum * v[col(j, c)]).sum();
        }
    }
    let o = mm(&att, wo);
    x.iter().zip(o).map(|(x, o)| x + o).collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let c = WgpuServerOptions::new().client()?;
    // Weights Wq, Wk, Wv, Wo (D x D, scaled), gamma, beta; input x (S x D).
    let w = |seed| values(D * D, seed).iter().map(|v| v / 4.0).collect();
    let gamma_host = values(D, 5).iter().map(|g| 1.0 + g).collect();
    let host: [Vec<f32>; 6] = [w(1), w(2), w(3), w(4), gamma_host, values(D, 6)];
    let x_host = values(S * D, 9);
    let [wq, wk, wv, wo, gamma, beta] = host.each_ref().map(|w| c.create_from_slice(w));
    let [wq, wk, wv, wo, gamma, beta] = [wq?, wk?, wv?, wo?, gamma?, beta?];
    let x = c.create_from_slice(&x_host)?.with_label("x");
    let [ln, q, k, v, att, y] = ["ln", "q", "k", "v", "att", "y"]
        .map(|l| c.empty_of::<f32>(u64::from(S * D)).map(|h| h.with_label(l)));
    let [ln, q, k, v, att, y] = [ln?, q?, k?, v?, att?, y?];
    let (norm, proj, proj_add, attend) =
        (layernorm()?, matmul(false)?, matmul(true)?, attention()?);

    let dims = [Lit::U32(S), Lit::U32(D), Lit::U32(D)];
    norm.launch(&c, [D, S], [&x, &gamma, &beta, &ln], &[Lit::U32(S)])?;
    for (w, out) in [(&wq, &q), (&wk, &k), (&wv, &v)] {
        proj.launch(&c, [D, S], [&ln, w, out], &dims)?;
    }
    attend.launch(&c, [S, S, H], [&q, &k, &v, &att], &[])?;
    proj_add.launch(&c, [D, S], [&att, &wo, &x, &y], &dims)?;

    let want = host_block(&x_host, &host);
    let got = c.read_vec::<f32>(&y)?;
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (f64::from(*g) - w).abs())
        .fold(0.0, f64::max);
    let reach = want
        .iter()
        .zip(&x_host)
        .map(|(w, x)| (w - f64::from(*x)).abs());
    let reach = reach.fold(0.0, f64::max);
    println!(
        "transformer block ({S} tokens, width {D}, {H} heads): max |device - host| = {worst:.2e} \
         (the block adds up to {reach:.2} to x)"
    );
    if worst > 1e-4 {
        return Err(format!("the device disagrees with the host by {worst}").into());
    }
    // A wrong shape is refused at the call: x is one row short here.
    let short = c
        .create_from_slice(&x_host[..((S - 1) * D) as usize])?
        .with_label("short x");
    let e = norm
        .launch(&c, [D, S], [&short, &gamma, &beta, &ln], &[Lit::U32(S)])
        .expect_err("a row short");
    println!("refused: {e}");
    Ok(())
}
