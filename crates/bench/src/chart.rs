//! The report as a picture: one horizontal bar per figure, its ratio to its
//! baseline on a log axis, from a line at ratio 1 (as fast as the
//! baseline) out to the ratio. Green where the figure beats its baseline,
//! red where it trails it (the direction read from the unit's "lower is
//! better" / "higher is better"), grey where the unit names no direction.
//!
//! Written by hand (no plotting dependency): `cargo xtask bench` writes it
//! next to the JSON (`target/bench/report.svg`), and
//! `bench --chart-from REPORT.json [--chart-out OUT.svg]` draws a committed
//! report without running anything (`docs/bench/*.svg`).

use std::fmt::Write as _;

use serde_json::Value;

/// Which way a figure improves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    Unknown,
}

impl Better {
    fn of_unit(unit: &str) -> Self {
        if unit.contains("lower is better") {
            Better::Lower
        } else if unit.contains("higher is better") {
            Better::Higher
        } else {
            Better::Unknown
        }
    }
}

/// One bar.
#[derive(Clone, Debug)]
pub struct Bar {
    pub name: String,
    /// `value / baseline_value`; `None` when either is missing or not
    /// finite and positive.
    pub ratio: Option<f64>,
    pub better: Better,
    pub baseline: String,
}

/// The bars of a report (the JSON `cargo xtask bench` writes) and its title.
pub fn bars_of_report(report: &Value) -> Result<(String, Vec<Bar>), String> {
    let figures = report
        .get("figures")
        .and_then(Value::as_array)
        .ok_or("the report has no `figures` array")?;
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let bars = figures
        .iter()
        .map(|f| Bar {
            name: text(f, "name"),
            ratio: f
                .get("ratio")
                .and_then(Value::as_f64)
                .filter(|r| r.is_finite() && *r > 0.0),
            better: Better::of_unit(&text(f, "unit")),
            baseline: text(f, "baseline"),
        })
        .collect();
    let adapter = report.get("adapter").cloned().unwrap_or(Value::Null);
    let mut title = format!(
        "{} ({}, {})",
        text(&adapter, "name"),
        text(&adapter, "backend"),
        text(&adapter, "driver")
    );
    if report.get("quick").and_then(Value::as_bool) == Some(true) {
        title.push_str(", quick run");
    }
    Ok((title, bars))
}

/// The chart of a report, as an SVG document.
pub fn svg_of_report(report: &Value) -> Result<String, String> {
    let (title, bars) = bars_of_report(report)?;
    Ok(svg(&title, &bars))
}

const WIDTH: f64 = 960.0;
const LEFT: f64 = 300.0; // figure names
const RIGHT: f64 = 70.0; // ratio labels past the widest bar
const TOP: f64 = 64.0;
const ROW: f64 = 24.0;
const BOTTOM: f64 = 64.0;

const GREEN: &str = "#2e9e5b";
const RED: &str = "#d0543c";
const GREY: &str = "#8c8c8c";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `10^e` as a tick label: `0.001x`, `1x`, `1000x`.
fn decade_label(e: i32) -> String {
    if e >= 0 {
        format!("{}x", 10u64.pow(e as u32))
    } else {
        format!("{}x", 10f64.powi(e))
    }
}

/// A ratio for its label: up to three decimals (`0.5x`, `1.503x`), whole
/// from 100 on, in scientific notation below 0.01.
fn ratio_label(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}x")
    } else if r >= 0.01 {
        let n = format!("{r:.3}");
        format!("{}x", n.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{r:.1e}x")
    }
}

/// The chart: bars in report order, a log axis spanning whole decades
/// around every ratio (at least 0.1x to 10x), a line at 1x.
pub fn svg(title: &str, bars: &[Bar]) -> String {
    let logs = bars.iter().filter_map(|b| b.ratio).map(f64::log10);
    let lo = logs.clone().fold(-1.0f64, f64::min).floor() as i32;
    let hi = logs.fold(1.0f64, f64::max).ceil() as i32;
    let plot = WIDTH - LEFT - RIGHT;
    let x = |ratio: f64| LEFT + (ratio.log10() - f64::from(lo)) / f64::from(hi - lo) * plot;
    let height = TOP + ROW * bars.len() as f64 + BOTTOM;
    let bottom = TOP + ROW * bars.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="{WIDTH}" height="{height}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="15" font-weight="bold">{}</text>"#,
        LEFT - 290.0,
        escape(title)
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="44" fill="rgb(85,85,85)">each figure / its baseline, log scale; 1x = as fast as the baseline</text>"#,
        LEFT - 290.0
    );
    // Decade grid and labels.
    for e in lo..=hi {
        let gx = x(10f64.powi(e));
        let _ = writeln!(
            s,
            r#"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{bottom}" stroke="rgb(227,227,227)"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{gx:.1}" y="{:.1}" text-anchor="middle" fill="rgb(85,85,85)">{}</text>"#,
            bottom + 16.0,
            decade_label(e)
        );
    }
    // Bars.
    let one = x(1.0);
    for (i, b) in bars.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let mid = y + ROW / 2.0 + 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{mid:.1}" text-anchor="end"><title>baseline: {}</title>{}</text>"#,
            LEFT - 8.0,
            escape(&b.baseline),
            escape(&b.name)
        );
        let Some(r) = b.ratio else {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{mid:.1}" fill="{GREY}">n/a</text>"#,
                one + 4.0
            );
            continue;
        };
        let color = if r == 1.0 || b.better == Better::Unknown {
            GREY
        } else if (b.better == Better::Lower) == (r < 1.0) {
            GREEN
        } else {
            RED
        };
        let (x0, x1) = (one.min(x(r)), one.max(x(r)));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {}</title></rect>"#,
            y + 4.0,
            (x1 - x0).max(1.0),
            ROW - 8.0,
            escape(&b.name),
            ratio_label(r)
        );
        let (lx, anchor) = if r >= 1.0 {
            (x1 + 4.0, "start")
        } else {
            (x0 - 4.0, "end")
        };
        // A label left of a short bar below 1x would cover the names'
        // column; put it right of the 1x line instead.
        let (lx, anchor) = if anchor == "end" && lx - 48.0 < LEFT {
            (one + 4.0, "start")
        } else {
            (lx, anchor)
        };
        let _ = writeln!(
            s,
            r#"<text x="{lx:.1}" y="{mid:.1}" text-anchor="{anchor}" fill="rgb(51,51,51)">{}</text>"#,
            ratio_label(r)
        );
    }
    // The baseline line, over the bars.
    let _ = writeln!(
        s,
        r#"<line x1="{one:.1}" y1="{:.1}" x2="{one:.1}" y2="{:.1}" stroke="rgb(34,34,34)" stroke-width="1.5"/>"#,
        TOP - 6.0,
        bottom + 4.0
    );
    // Legend.
    let ly = bottom + 40.0;
    let mut lx = LEFT;
    for (color, text) in [
        (GREEN, "better than its baseline"),
        (RED, "worse than its baseline"),
        (GREY, "no direction (a target ratio)"),
    ] {
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{ly:.1}">{text}</text>"#,
            ly - 10.0,
            lx + 16.0
        );
        lx += 200.0;
    }
    s.push_str("</svg>\n");
    s
}

/// `--chart-from PATH [--chart-out PATH]` on the command line: the report
/// to draw and where the SVG goes (default: beside it, `.svg`).
pub fn paths_from_args() -> Option<(String, String)> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let from = value("--chart-from")?;
    let out = value("--chart-out").unwrap_or_else(|| {
        std::path::Path::new(&from)
            .with_extension("svg")
            .to_string_lossy()
            .into_owned()
    });
    Some((from, out))
}

/// Draws the report at `from` into `out`, running nothing.
pub fn convert(from: &str, out: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(from).map_err(|e| format!("reading {from}: {e}"))?;
    let report: Value = serde_json::from_str(&text).map_err(|e| format!("parsing {from}: {e}"))?;
    std::fs::write(out, svg_of_report(&report)?).map_err(|e| format!("writing {out}: {e}"))?;
    println!("wrote {out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> Value {
        json!({
            "adapter": {"name": "GPU <1>", "backend": "Vulkan", "device_type": "DiscreteGpu",
                        "driver": "d", "driver_info": ""},
            "quick": true,
            "figures": [
                {"name": "a.fast_us", "value": 1.0, "unit": "us (lower is better)",
                 "baseline": "raw", "baseline_value": 2.0, "ratio": 0.5},
                {"name": "b.slow_gbps", "value": 1.0, "unit": "GB/s (higher is better)",
                 "baseline": "raw", "baseline_value": 4000.0, "ratio": 0.00025},
                {"name": "c.target", "value": 1.2, "unit": "ratio (target <= 1.25)",
                 "baseline": "ideal", "baseline_value": 1.0, "ratio": 1.2},
                {"name": "d.missing", "value": null, "unit": "us (lower is better)",
                 "baseline": "raw", "baseline_value": 1.0, "ratio": null}
            ]
        })
    }

    #[test]
    fn one_bar_per_figure_on_a_log_axis_with_a_line_at_one() {
        let (title, bars) = bars_of_report(&report()).expect("report");
        assert_eq!(title, "GPU <1> (Vulkan, d), quick run");
        assert_eq!(bars.len(), 4);
        assert_eq!(bars[0].better, Better::Lower);
        assert_eq!(bars[2].better, Better::Unknown);
        assert_eq!(bars[3].ratio, None);
        let svg = svg(&title, &bars);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("GPU &lt;1&gt;"), "escaped");
        // 4 bars' names, 3 bars drawn, one n/a.
        assert_eq!(
            svg.matches("<rect x=").count(),
            3 + 3,
            "3 bars + 3 legend swatches"
        );
        assert!(svg.contains("n/a"));
        // Decades from 1e-4 (the smallest ratio) to 10 (at least).
        assert!(svg.contains(">0.0001x<") && svg.contains(">10x<") && svg.contains(">1x<"));
        assert!(svg.contains(GREEN) && svg.contains(RED) && svg.contains(GREY));
    }

    #[test]
    fn ratio_labels() {
        assert_eq!(ratio_label(0.5), "0.5x");
        assert_eq!(ratio_label(1.0), "1x");
        assert_eq!(ratio_label(1.503), "1.503x");
        assert_eq!(ratio_label(868.08), "868x");
        assert_eq!(ratio_label(0.000_012_7), "1.3e-5x");
        assert_eq!(decade_label(-3), "0.001x");
        assert_eq!(decade_label(2), "100x");
    }
}
