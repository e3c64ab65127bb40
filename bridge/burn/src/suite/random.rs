//! burn's device RNG: samples are checked on the host against their
//! distribution, and a case returns one bool per property (the two builds'
//! RNGs may legitimately produce different bytes, so raw samples are never
//! compared). Bounds are exact; moments within 4 standard errors.

use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};

use super::{Case, Tol};

const G: &str = "random";

/// The samples of a float tensor on the host.
fn host(t: Tensor<1>) -> Vec<f64> {
    t.into_data().iter::<f64>().collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn var(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() as f64 - 1.0)
}

/// Checks of a sample against a distribution of mean `mu`, variance `s2`
/// and fourth central moment `m4`: the sample mean and sample variance
/// within 4 standard errors.
fn moments(v: &[f64], mu: f64, s2: f64, m4: f64) -> [bool; 2] {
    let n = v.len() as f64;
    let mean_ok = (mean(v) - mu).abs() <= 4.0 * (s2 / n).sqrt();
    let var_ok = (var(v) - s2).abs() <= 4.0 * ((m4 - s2 * s2) / n).sqrt();
    [mean_ok, var_ok]
}

/// A fraction `got` of `n` trials within 4 standard errors of `p`.
fn fraction_ok(got: f64, p: f64, n: usize) -> bool {
    (got - p).abs() <= 4.0 * (p * (1.0 - p) / n as f64).sqrt()
}

fn checks(v: Vec<bool>) -> Vec<TensorData> {
    let n = v.len();
    vec![TensorData::new(v, [n])]
}

fn uniform_checks(v: &[f64], lo: f64, hi: f64) -> Vec<bool> {
    let w = hi - lo;
    let [m, s] = moments(v, (lo + hi) / 2.0, w * w / 12.0, w.powi(4) / 80.0);
    let bounds = v.iter().all(|&x| x >= lo && x < hi);
    // The lowest and highest tenths hold a tenth each (no clumping at an end).
    let low = v.iter().filter(|&&x| x < lo + w / 10.0).count() as f64 / v.len() as f64;
    let high = v.iter().filter(|&&x| x >= hi - w / 10.0).count() as f64 / v.len() as f64;
    vec![
        bounds,
        m,
        s,
        fraction_ok(low, 0.1, v.len()),
        fraction_ok(high, 0.1, v.len()),
    ]
}

fn normal_checks(v: &[f64], mu: f64, sd: f64) -> Vec<bool> {
    let s2 = sd * sd;
    let [m, s] = moments(v, mu, s2, 3.0 * s2 * s2);
    let n = v.len();
    let within1 = v.iter().filter(|&&x| (x - mu).abs() < sd).count() as f64 / n as f64;
    let within2 = v.iter().filter(|&&x| (x - mu).abs() < 2.0 * sd).count() as f64 / n as f64;
    let finite = v.iter().all(|x| x.is_finite());
    vec![
        finite,
        m,
        s,
        fraction_ok(within1, 0.682_689_492, n),
        fraction_ok(within2, 0.954_499_736, n),
    ]
}

const N: usize = 100_000;

pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    out.push(Case::new(G, "default_uniform01_1e5", Tol::Exact, |dev| {
        let v = host(Tensor::random([N], Distribution::Default, dev));
        checks(uniform_checks(&v, 0.0, 1.0))
    }));
    out.push(Case::new(G, "uniform_m3_5_1e5", Tol::Exact, |dev| {
        let v = host(Tensor::random([N], Distribution::Uniform(-3.0, 5.0), dev));
        checks(uniform_checks(&v, -3.0, 5.0))
    }));
    out.push(Case::new(G, "uniform_2d_317x331", Tol::Exact, |dev| {
        let t: Tensor<2> = Tensor::random([317, 331], Distribution::Uniform(1.0, 2.0), dev);
        let v = host(t.reshape([317 * 331]));
        let mut c = uniform_checks(&v, 1.0, 2.0);
        // The tail of the buffer is filled like the head.
        let tail = &v[v.len() - 5000..];
        c.push(moments(tail, 1.5, 1.0 / 12.0, 1.0 / 80.0)[0]);
        checks(c)
    }));
    out.push(Case::new(G, "normal_2_0.5_1e5", Tol::Exact, |dev| {
        let v = host(Tensor::random([N], Distribution::Normal(2.0, 0.5), dev));
        checks(normal_checks(&v, 2.0, 0.5))
    }));
    out.push(Case::new(
        G,
        "normal_standard_2d_257x513",
        Tol::Exact,
        |dev| {
            let t: Tensor<2> = Tensor::random([257, 513], Distribution::Normal(0.0, 1.0), dev);
            checks(normal_checks(&host(t.reshape([257 * 513])), 0.0, 1.0))
        },
    ));
    out.push(Case::new(G, "bernoulli_0.3_1e5", Tol::Exact, |dev| {
        let v = host(Tensor::random([N], Distribution::Bernoulli(0.3), dev));
        let binary = v.iter().all(|&x| x == 0.0 || x == 1.0);
        checks(vec![binary, fraction_ok(mean(&v), 0.3, N)])
    }));
    out.push(Case::new(G, "bernoulli_0.97_1e5", Tol::Exact, |dev| {
        let v = host(Tensor::random([N], Distribution::Bernoulli(0.97), dev));
        let binary = v.iter().all(|&x| x == 0.0 || x == 1.0);
        checks(vec![binary, fraction_ok(mean(&v), 0.97, N)])
    }));
    out.push(Case::new(G, "int_uniform_0_10_1e5", Tol::Exact, |dev| {
        let t: Tensor<1, Int> = Tensor::random([N], Distribution::Uniform(0.0, 10.0), dev);
        let v: Vec<i64> = t.into_data().iter::<i64>().collect();
        let mut c = vec![v.iter().all(|&x| (0..10).contains(&x))];
        for k in 0..10 {
            let f = v.iter().filter(|&&x| x == k).count() as f64 / N as f64;
            c.push(fraction_ok(f, 0.1, N));
        }
        checks(c)
    }));
    out.push(Case::new(G, "random_like_normal_1e5", Tol::Exact, |dev| {
        let base = Tensor::<1>::zeros([N], dev);
        let v = host(base.random_like(Distribution::Normal(-1.0, 3.0)));
        checks(normal_checks(&v, -1.0, 3.0))
    }));
    out.push(Case::new(
        G,
        "seed_reproducible_and_draws_differ",
        Tol::Exact,
        |dev: &Device| {
            dev.seed(1234);
            let a = host(Tensor::random([4096], Distribution::Default, dev));
            let b = host(Tensor::random([4096], Distribution::Default, dev));
            dev.seed(1234);
            let c = host(Tensor::random([4096], Distribution::Default, dev));
            checks(vec![a == c, a != b])
        },
    ));
    out
}
