//! The suite's records (`bridge/burn/src/suite/mod.rs` writes them) read
//! back, and one build's compared with another's.

use std::collections::BTreeMap;

/// How two builds must agree on a case.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tol {
    Exact,
    Close { rel: f64, abs: f64 },
}

/// One output tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// `f`, `i` or `b`.
    pub kind: char,
    pub shape: Vec<usize>,
    /// Floats as `f64` bits; ints as `i64`; bools as 0/1.
    pub values: Vec<u64>,
}

/// One case of one build.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub group: String,
    pub name: String,
    pub tol: Tol,
    /// The outputs, or the case's error.
    pub outputs: Result<Vec<Output>, String>,
}

/// What the two builds did with a case.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Passed,
    /// Ran on neither, or upstream could not run it: nothing to compare.
    Skipped(String),
    Failed(String),
}

fn parse_tol(s: &str) -> Result<Tol, String> {
    if s == "exact" {
        return Ok(Tol::Exact);
    }
    let mut rel = None;
    let mut abs = None;
    for part in s.split(',') {
        match part.split_once('=') {
            Some(("rel", v)) => rel = v.parse().ok(),
            Some(("abs", v)) => abs = v.parse().ok(),
            _ => return Err(format!("tolerance {s:?}")),
        }
    }
    match (rel, abs) {
        (Some(rel), Some(abs)) => Ok(Tol::Close { rel, abs }),
        _ => Err(format!("tolerance {s:?}")),
    }
}

fn parse_output(s: &str) -> Result<Output, String> {
    let bad = || format!("output {:?}", s.chars().take(60).collect::<String>());
    let kind = s.chars().next().ok_or_else(bad)?;
    let rest = s.get(1..).ok_or_else(bad)?;
    let (shape, values) = rest
        .strip_prefix('[')
        .and_then(|r| r.split_once("]:"))
        .ok_or_else(bad)?;
    let shape = shape
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().map_err(|_| bad()))
        .collect::<Result<Vec<usize>, _>>()?;
    let values = values
        .split(',')
        .filter(|v| !v.is_empty())
        .map(|v| match kind {
            'f' => u64::from_str_radix(v, 16).map_err(|_| bad()),
            'i' => v.parse::<i64>().map(|i| i as u64).map_err(|_| bad()),
            'b' => v.parse::<u64>().map_err(|_| bad()),
            _ => Err(bad()),
        })
        .collect::<Result<Vec<u64>, _>>()?;
    Ok(Output {
        kind,
        shape,
        values,
    })
}

/// Every record of a build's file, by `group/name`.
pub fn parse(text: &str) -> Result<BTreeMap<String, Record>, String> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.splitn(4, '\t').collect();
        let [group, name, tol, outputs] = fields[..] else {
            return Err(format!("line {}: {} fields", n + 1, fields.len()));
        };
        let outputs = match outputs.strip_prefix("ERROR ") {
            Some(message) => Err(message.to_owned()),
            None => Ok(outputs
                .split(';')
                .filter(|o| !o.is_empty())
                .map(parse_output)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("line {}: {e}", n + 1))?),
        };
        let record = Record {
            group: group.to_owned(),
            name: name.to_owned(),
            tol: parse_tol(tol).map_err(|e| format!("line {}: {e}", n + 1))?,
            outputs,
        };
        out.insert(format!("{group}/{name}"), record);
    }
    Ok(out)
}

/// Whether float `a` (ours) agrees with `b` (upstream) within `tol`.
fn close(a: f64, b: f64, tol: Tol) -> bool {
    match tol {
        Tol::Exact => a.to_bits() == b.to_bits() || (a == b),
        Tol::Close { rel, abs } => {
            if a.is_nan() || b.is_nan() {
                return a.is_nan() && b.is_nan();
            }
            if a.is_infinite() || b.is_infinite() {
                return a == b;
            }
            (a - b).abs() <= abs + rel * b.abs()
        }
    }
}

fn compare_output(i: usize, ours: &Output, theirs: &Output, tol: Tol) -> Result<(), String> {
    if ours.kind != theirs.kind || ours.shape != theirs.shape {
        return Err(format!(
            "output {i}: {}{:?} here, {}{:?} upstream",
            ours.kind, ours.shape, theirs.kind, theirs.shape
        ));
    }
    if ours.values.len() != theirs.values.len() {
        return Err(format!(
            "output {i}: {} values here, {} upstream",
            ours.values.len(),
            theirs.values.len()
        ));
    }
    let mut bad = 0usize;
    let mut first = None;
    for (k, (a, b)) in ours.values.iter().zip(&theirs.values).enumerate() {
        let agree = match ours.kind {
            'f' => close(f64::from_bits(*a), f64::from_bits(*b), tol),
            _ => a == b,
        };
        if !agree {
            bad += 1;
            first.get_or_insert((k, *a, *b));
        }
    }
    match first {
        None => Ok(()),
        Some((k, a, b)) => {
            let show = |v: u64| match ours.kind {
                'f' => format!("{:e}", f64::from_bits(v)),
                _ => (v as i64).to_string(),
            };
            Err(format!(
                "output {i}: {bad} of {} values differ; first at {k}: {} here, {} upstream",
                ours.values.len(),
                show(a),
                show(b)
            ))
        }
    }
}

/// Our record of a case against upstream's (`None`: upstream has no such
/// case, a build mismatch).
pub fn judge(ours: &Record, theirs: Option<&Record>) -> Verdict {
    let Some(theirs) = theirs else {
        return Verdict::Failed("upstream's build has no such case".into());
    };
    match (&ours.outputs, &theirs.outputs) {
        (Err(a), Err(b)) => Verdict::Skipped(format!("both refuse: here {a}; upstream {b}")),
        (Ok(_), Err(b)) => Verdict::Skipped(format!("upstream cannot run it: {b}")),
        (Err(a), Ok(_)) => Verdict::Failed(format!("fails here only: {a}")),
        (Ok(a), Ok(b)) => {
            if a.len() != b.len() {
                return Verdict::Failed(format!("{} outputs here, {} upstream", a.len(), b.len()));
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                if let Err(e) = compare_output(i, x, y, ours.tol) {
                    return Verdict::Failed(e);
                }
            }
            Verdict::Passed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &str = "grp\ta\texact\ti[2]:1,-2\n\
                        grp\tb\trel=1e-4,abs=1e-6\tf[1]:3ff0000000000000\n\
                        grp\tc\texact\tERROR nope\n\
                        other\td\texact\tb[2]:1,0\n";

    #[test]
    fn records_round_trip_and_compare() {
        let ours = parse(OURS).expect("parse");
        assert_eq!(ours.len(), 4);
        let a = &ours["grp/a"];
        assert_eq!(
            a.outputs.as_ref().expect("ok")[0].values,
            [1, (-2i64) as u64]
        );
        // 1.00005 against 1.0: within rel 1e-4.
        let theirs_text = OURS.replace("3ff0000000000000", &format!("{:x}", 1.00005f64.to_bits()));
        let theirs = parse(&theirs_text).expect("parse");
        assert_eq!(judge(&ours["grp/b"], theirs.get("grp/b")), Verdict::Passed);
        assert!(matches!(
            judge(&ours["grp/c"], theirs.get("grp/c")),
            Verdict::Skipped(_)
        ));
        // An int off by one fails, naming where.
        let off = parse(&OURS.replace("1,-2", "1,-3")).expect("parse");
        match judge(&ours["grp/a"], off.get("grp/a")) {
            Verdict::Failed(why) => assert!(why.contains("first at 1"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Failing here only is a failure; a missing case too.
        let ok_upstream = parse(&OURS.replace("ERROR nope", "i[0]:")).expect("parse");
        assert!(matches!(
            judge(&ours["grp/c"], ok_upstream.get("grp/c")),
            Verdict::Failed(_)
        ));
        assert!(matches!(judge(&ours["grp/a"], None), Verdict::Failed(_)));
    }

    #[test]
    fn nan_matches_only_nan_and_infinities_match_exactly() {
        let t = Tol::Close {
            rel: 1e-3,
            abs: 0.0,
        };
        assert!(close(f64::NAN, f64::NAN, t));
        assert!(!close(f64::NAN, 1.0, t));
        assert!(close(f64::INFINITY, f64::INFINITY, t));
        assert!(!close(f64::INFINITY, f64::MAX, t));
        assert!(!close(1.1, 1.0, t));
    }
}
