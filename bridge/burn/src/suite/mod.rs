//! The differential suite: cases of burn's public tensor API, each a
//! function of a device returning tensors, run on one build and written as
//! records that `cargo xtask burn` compares between builds.
//!
//! Inputs come from the host ([`crate::host::Rng`]), never from the device
//! RNG (except in the `random` group, which checks distributions, not
//! bytes), so both builds compute on the same bytes. A case that panics
//! (burn reports errors by panicking) is recorded as an error with its
//! message.

use std::panic::{AssertUnwindSafe, catch_unwind};

use burn::tensor::{DType, Device, TensorData};

mod cast;
mod compare;
mod conv;
mod elementwise;
mod grad;
mod index;
mod inputs;
mod matmul;
mod pool;
mod random;
mod reduce;
pub mod runner;
mod scan;
mod shape;
mod softmax;
mod sort;

/// How two builds' values of a case must agree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tol {
    /// Bit for bit (ints, bools, data movement, and floats that only move).
    Exact,
    /// `|a - b| <= abs + rel * |b|` per element (floats); NaN only where
    /// the other has NaN, infinities equal.
    Close {
        /// Relative part.
        rel: f64,
        /// Absolute part.
        abs: f64,
    },
}

impl Tol {
    /// Float arithmetic of a few operations per element.
    pub const ELEMENTWISE: Tol = Tol::Close {
        rel: 1e-5,
        abs: 1e-6,
    };
    /// Sums and dot products: summation order differs between kernels.
    pub const REDUCTION: Tol = Tol::Close {
        rel: 1e-4,
        abs: 1e-5,
    };

    fn text(self) -> String {
        match self {
            Tol::Exact => "exact".into(),
            Tol::Close { rel, abs } => format!("rel={rel:e},abs={abs:e}"),
        }
    }
}

/// What a case computes: its outputs on a device.
pub type Computation = Box<dyn Fn(&Device) -> Vec<TensorData> + Send + Sync>;

/// One case.
pub struct Case {
    /// The group it counts in (`burn suite GROUP: ...`).
    pub group: &'static str,
    /// Its name, unique in the suite.
    pub name: String,
    /// How the builds must agree.
    pub tol: Tol,
    /// The computation.
    pub run: Computation,
}

impl Case {
    /// A case of `group` named `name`.
    pub fn new(
        group: &'static str,
        name: impl Into<String>,
        tol: Tol,
        run: impl Fn(&Device) -> Vec<TensorData> + Send + Sync + 'static,
    ) -> Self {
        Case {
            group,
            name: name.into(),
            tol,
            run: Box::new(run),
        }
    }
}

/// Every case of the suite, in a stable order.
pub fn cases() -> Vec<Case> {
    let groups: [fn() -> Vec<Case>; 14] = [
        elementwise::cases,
        compare::cases,
        reduce::cases,
        matmul::cases,
        conv::cases,
        pool::cases,
        softmax::cases,
        index::cases,
        shape::cases,
        sort::cases,
        scan::cases,
        cast::cases,
        random::cases,
        grad::cases,
    ];
    groups.into_iter().flat_map(|group| group()).collect()
}

impl Case {
    /// `group/name`: what filters, divergences and records name it by.
    pub fn key(&self) -> String {
        format!("{}/{}", self.group, self.name)
    }
}

/// The cases a run takes: those whose key starts with `filter`, and of
/// those every `every`-th of each group, from its first (CI's sample:
/// every group, a fraction of its cases).
pub fn selected(filter: &str, every: usize) -> Vec<Case> {
    let mut seen: std::collections::HashMap<&str, usize> = Default::default();
    cases()
        .into_iter()
        .filter(|c| c.key().starts_with(filter))
        .filter(|c| {
            let n = seen.entry(c.group).or_default();
            *n += 1;
            (*n - 1).is_multiple_of(every.max(1))
        })
        .collect()
}

/// Runs `cases` in order on `device`, handing each one's record line (see
/// [`record`]) to `write` as soon as it is made, so a run that dies keeps
/// what it did; `starting` hears each case's key before it runs.
pub fn run(
    device: &Device,
    cases: Vec<Case>,
    mut starting: impl FnMut(&str),
    mut write: impl FnMut(&str),
) {
    for c in cases {
        starting(&c.key());
        let out = catch_unwind(AssertUnwindSafe(|| (c.run)(device)));
        write(&record(&c, out.map_err(|p| panic_text(&*p))));
    }
}

/// The key of a record line (`GROUP\tNAME\t...` gives `GROUP/NAME`).
pub fn record_key(line: &str) -> Option<String> {
    let mut fields = line.split('\t');
    Some(format!("{}/{}", fields.next()?, fields.next()?))
}

/// A case's record: `GROUP\tNAME\tTOL\tOUTPUTS`, where OUTPUTS is
/// `ERROR <message>` or the outputs separated by `;`, each
/// `KIND[SHAPE]:VALUES` (KIND `f` with each value as the hex bits of an
/// `f64`, `i` decimal, `b` 0/1; SHAPE and VALUES comma-separated).
pub fn record(case: &Case, out: Result<Vec<TensorData>, String>) -> String {
    let outputs = match out {
        Ok(values) => values.iter().map(encode).collect::<Vec<_>>().join(";"),
        Err(message) => format!("ERROR {}", message.replace(['\t', '\n'], " ")),
    };
    format!(
        "{}\t{}\t{}\t{}",
        case.group,
        case.name,
        case.tol.text(),
        outputs
    )
}

fn encode(data: &TensorData) -> String {
    let shape: Vec<String> = data.shape().iter().map(|d| d.to_string()).collect();
    let shape = shape.join(",");
    let dtype = data.dtype();
    let values: Vec<String> = if dtype.is_float() {
        data.iter::<f64>()
            .map(|v| format!("{:x}", v.to_bits()))
            .collect()
    } else if matches!(dtype, DType::Bool(_)) {
        data.iter::<bool>()
            .map(|v| u8::from(v).to_string())
            .collect()
    } else {
        data.iter::<i64>().map(|v| v.to_string()).collect()
    };
    let kind = if dtype.is_float() {
        "f"
    } else if matches!(dtype, DType::Bool(_)) {
        "b"
    } else {
        "i"
    };
    format!("{kind}[{shape}]:{}", values.join(","))
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string())
}
