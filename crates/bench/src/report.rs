//! The report: one figure per measurement, printed as a table and written
//! as JSON (`target/bench/report.json`, schema in `docs/benchmarks.md`).

use serde_json::{Value, json};

/// One measured figure against its baseline.
#[derive(Debug, Clone)]
pub struct Figure {
    pub name: &'static str,
    pub value: f64,
    pub unit: String,
    pub baseline: &'static str,
    pub baseline_value: f64,
}

impl Figure {
    pub fn new(
        name: &'static str,
        value: f64,
        unit: impl Into<String>,
        baseline: &'static str,
        baseline_value: f64,
    ) -> Self {
        Self {
            name,
            value,
            unit: unit.into(),
            baseline,
            baseline_value,
        }
    }

    pub fn ratio(&self) -> f64 {
        self.value / self.baseline_value
    }
}

/// A JSON number, or `null` for NaN and infinities (JSON has neither).
fn number(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

/// The whole report as JSON.
pub fn to_json(
    adapter: &compute_runtime::AdapterSummary,
    quick: bool,
    figures: &[Figure],
) -> Value {
    json!({
        "adapter": {
            "name": adapter.name,
            "backend": adapter.backend,
            "device_type": adapter.device_type,
            "driver": adapter.driver,
            "driver_info": adapter.driver_info,
        },
        "quick": quick,
        "figures": figures.iter().map(|f| json!({
            "name": f.name,
            "value": number(f.value),
            "unit": f.unit,
            "baseline": f.baseline,
            "baseline_value": number(f.baseline_value),
            "ratio": number(f.ratio()),
        })).collect::<Vec<_>>(),
    })
}

/// The table printed after a run.
pub fn print_table(figures: &[Figure]) {
    println!(
        "\n{:<36} {:>12} {:>12} {:>8}  unit / baseline",
        "figure", "value", "baseline", "ratio"
    );
    for f in figures {
        println!(
            "{:<36} {:>12.3} {:>12.3} {:>8.3}  {} / {}",
            f.name,
            f.value,
            f.baseline_value,
            f.ratio(),
            f.unit,
            f.baseline
        );
    }
}
