//! The words of a finding: each workload's sentence from its verdicts, and the phrases the
//! page and stdout share. Pure text; the verdicts come from [`super::findings`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::plan::WorkloadKind;
use crate::report::load_unit;

use super::findings::{Against, Aggregate};
use super::model::shown;
use super::stats::{self, Comparison, GeometricMean, Verdict};

/// What a finding calls the throughput it compares.
pub(super) fn tps_word(kind: WorkloadKind) -> &'static str {
    shown(kind).tps_word
}

fn client_list(kind: WorkloadKind, counts: &[u32]) -> String {
    let list: Vec<String> = counts.iter().map(u32::to_string).collect();
    let unit = load_unit(kind);
    match list.len() {
        1 => format!("at {} {unit}", list[0]),
        _ => format!(
            "by the geometric mean over {} {} counts ({})",
            list.len(),
            unit.trim_end_matches('s'),
            list.join(", ")
        ),
    }
}

/// `at 250 clients` / `at 250 and 500 clients` / `at 10, 25 and 50 clients`.
fn at_counts(kind: WorkloadKind, counts: &[u32]) -> String {
    let list: Vec<String> = counts.iter().map(u32::to_string).collect();
    let joined = match list.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => list.join(""),
    };
    format!("at {joined} {}", load_unit(kind))
}

/// A change that prints as 0.0 %: no change worth a number (a sentence says it in words).
fn unchanged(pct: f64) -> bool {
    pct.abs() < 0.05
}

/// A change with its interval as [`stats::display_change`] says it, but one that prints as
/// 0.0 % in words (`same`): `as fast as a (−0.4 … +0.4)`, `as fast as a (one sample)`.
fn change_text(pct: f64, ci: Option<(f64, f64)>, same: &str) -> String {
    if !unchanged(pct) {
        return stats::display_change(pct, ci);
    }
    match ci {
        Some((lo, hi)) => format!("{same} ({} … {})", stats::signed(lo), stats::signed(hi)),
        None => format!("{same} (one sample)"),
    }
}

/// What an unchanged figure of an aggregate reads as: `as fast as a` against the baseline,
/// `as fast with them on` for data checksums.
fn same_words(a: &Aggregate, baseline: &str) -> String {
    match a.against {
        Against::Baseline => format!("as fast as {baseline}"),
        Against::ChecksumsOff => "as fast with them on".to_string(),
    }
}

/// More or fewer, by a positive percentage.
fn more_or_less(pct: f64, more: &str, less: &str) -> String {
    if pct >= 0.0 {
        format!("{:.1} % {more}", pct)
    } else {
        format!("{:.1} % {less}", -pct)
    }
}

/// Machines named one by one in a summary sentence; beyond this it groups them by verdict.
const NAMED_IN_SENTENCE: usize = 3;

/// What a summary sentence is made of.
pub(super) struct Sentence<'a> {
    pub(super) workload: &'a str,
    pub(super) kind: WorkloadKind,
    pub(super) baseline: &'a str,
    pub(super) threshold_pct: f64,
    pub(super) versus: &'a [Aggregate],
    pub(super) unmatched: &'a [&'a str],
    pub(super) checksum_costs: &'a [Aggregate],
    pub(super) prices: &'a BTreeMap<&'a str, f64>,
}

/// How a verdict reads after a machine's name, against `other`.
fn verdict_clause(v: Verdict, kind: WorkloadKind, other: &str, t: f64) -> String {
    let tps = shown(kind).verdict_words;
    match v {
        Verdict::Faster => format!("is faster{tps} than {other}"),
        Verdict::Slower => format!("is slower{tps} than {other}"),
        Verdict::Same => format!("is the same{tps} as {other} within ±{t} %"),
        Verdict::Small => format!("differs{tps} from {other} by less than {t} %"),
        Verdict::Inconclusive => format!("against {other} is inconclusive at ±{t} %"),
        Verdict::OneSample => format!("against {other} has one sample"),
    }
}

/// What a client-bound count is called in a sentence, and why it says no more.
const CLIENT_BOUND_WORDS: &str = "client-bound";
const CLIENT_BOUND_WHY: &str =
    "the benchmark client's CPU, not the server, set the tps there: no server difference";

/// The client counts whose own verdict is not the aggregate's (every count when there is no
/// mean), named with theirs: `inconclusive at 250 clients (+3.0 % (−4.1 … +10.6))`,
/// `one sample at 1000 clients (+5.0 %, no interval, about 4 repeats a side would do)`; a
/// change that prints as 0.0 % in words (`as fast (−4.1 … +4.0)`: the sentence has named
/// what it is against). A client-bound count is named as that, whatever its verdict:
/// `client-bound at 500 clients (+30.1 % (+22.0 … +38.9); the benchmark client's CPU, …)`.
fn exceptions(a: &Aggregate, kind: WorkloadKind) -> Vec<String> {
    let mine = a.verdict();
    let same = match a.against {
        Against::Baseline => "as fast",
        Against::ChecksumsOff => "as fast with them on",
    };
    let mut by: BTreeMap<&str, Vec<&(u32, Comparison)>> = BTreeMap::new();
    for p in &a.points {
        if a.client_bound.contains(&p.0) {
            by.entry(CLIENT_BOUND_WORDS).or_default().push(p);
        } else if p.1.verdict != mine || a.mean.is_none() {
            by.entry(p.1.verdict.as_str()).or_default().push(p);
        }
    }
    by.into_iter()
        .map(|(verdict, points)| {
            let counts: Vec<u32> = points.iter().map(|p| p.0).collect();
            let figures: Vec<String> = points
                .iter()
                .map(|p| match p.1.ci_pct() {
                    Some(ci) => change_text(p.1.change_pct(), Some(ci), same),
                    None if unchanged(p.1.change_pct()) => same.to_string(),
                    None => format!("{} %", stats::signed(p.1.change_pct())),
                })
                .collect();
            let mut s = format!(
                "{verdict} {} ({}",
                at_counts(kind, &counts),
                figures.join("; ")
            );
            if verdict == CLIENT_BOUND_WORDS {
                let _ = write!(s, "; {CLIENT_BOUND_WHY}");
            } else if verdict == Verdict::OneSample.as_str() {
                s.push_str(", no interval");
                if let Some(n) = points.iter().filter_map(|p| p.1.repeats_suggested).max() {
                    let _ = write!(s, "; {} repeats a side would do", repeats_text(n));
                }
            }
            s.push(')');
            s
        })
        .collect()
}

pub(super) fn repeats_text(n: u32) -> String {
    if n > stats::MAX_SUGGESTED_REPEATS {
        format!("more than {}", stats::MAX_SUGGESTED_REPEATS)
    } else {
        format!("about {n}")
    }
}

/// The generated summary of one workload: each machine's verdict against the baseline with
/// the geometric mean of its tps ratios over the client counts that have an interval, and
/// that mean's interval; the client counts whose own verdict differs (inconclusive, one
/// sample, …) named with their figures, never folded in; price and tps per dollar-hour
/// where there is a mean; then data checksums on against off the same way. With more than
/// a few machines it groups them by verdict instead.
pub(super) fn sentence(s: &Sentence) -> String {
    let (kind, base, t) = (s.kind, s.baseline, s.threshold_pct);
    let tps = tps_word(kind);
    let mut parts = Vec::new();
    if s.versus.len() <= NAMED_IN_SENTENCE {
        for a in s.versus {
            let mut p = match &a.mean {
                Some(m) => format!("{} {}", a.machine, verdict_clause(m.verdict, kind, base, t)),
                None => format!("{} against {base}", a.machine),
            };
            if let Some(m) = &a.mean {
                let _ = write!(
                    p,
                    ": {} {}",
                    change_text(m.change_pct(), Some(m.ci_pct()), &same_words(a, base)),
                    client_list(kind, &a.counted())
                );
                let price = s.prices.get(a.machine.as_str()).copied().unwrap_or(0.0);
                let base_price = s.prices.get(base).copied().unwrap_or(0.0);
                if price > 0.0 && base_price > 0.0 {
                    let f = base_price / price;
                    let pct = |r: f64| (r * f - 1.0) * 100.0;
                    let price_pct = (price - base_price) / base_price * 100.0;
                    let at = if unchanged(price_pct) {
                        "at the same price".to_string()
                    } else {
                        format!(
                            "at {} per hour",
                            more_or_less(price_pct, "dearer", "cheaper")
                        )
                    };
                    let ci = Some((pct(m.ci.0), pct(m.ci.1)));
                    let gives = if unchanged(pct(m.ratio)) {
                        change_text(pct(m.ratio), ci, &format!("the same {tps} per dollar-hour"))
                    } else {
                        format!(
                            "{} {tps} per dollar-hour",
                            stats::display_change(pct(m.ratio), ci)
                        )
                    };
                    let _ = write!(p, "; {at} it gives {gives}");
                }
            }
            let named = exceptions(a, kind);
            if !named.is_empty() {
                p.push_str(if a.mean.is_some() { "; " } else { ": " });
                p.push_str(&named.join("; "));
            }
            parts.push(p);
        }
    } else {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for a in s.versus {
            groups
                .entry(a.verdict().as_str())
                .or_default()
                .push(&a.machine);
        }
        let list: Vec<String> = groups
            .iter()
            .map(|(v, ms)| format!("{} {v} ({})", ms.len(), ms.join(", ")))
            .collect();
        parts.push(format!(
            "against {base} in {tps}, by the geometric mean over client counts at ±{t} %, the {} other runs are: {}",
            s.versus.len(),
            list.join(", ")
        ));
    }
    if !s.unmatched.is_empty() {
        parts.push(format!(
            "{} ran no {} count that {base} ran",
            s.unmatched.join(", "),
            load_unit(kind).trim_end_matches('s')
        ));
    }
    let checks = if s.checksum_costs.len() <= NAMED_IN_SENTENCE {
        s.checksum_costs
            .iter()
            .map(|a| {
                let mut p = format!("{}: ", a.machine);
                let mut named = exceptions(a, kind);
                if let Some(m) = &a.mean {
                    let _ = write!(
                        p,
                        "{}, {}",
                        checksum_verdict(m, t),
                        change_text(m.change_pct(), Some(m.ci_pct()), &same_words(a, base))
                    );
                    if a.counted().len() > 1 {
                        let _ = write!(p, " {}", client_list(kind, &a.counted()));
                    }
                    named.insert(0, p);
                    return named.join("; ");
                }
                p.push_str(&named.join("; "));
                p
            })
            .collect::<Vec<_>>()
            .join("; ")
    } else {
        let mut groups: BTreeMap<&str, usize> = BTreeMap::new();
        for a in s.checksum_costs {
            *groups.entry(a.verdict().as_str()).or_default() += 1;
        }
        format!(
            "over the {} runs that ran both, {}",
            s.checksum_costs.len(),
            groups
                .iter()
                .map(|(v, n)| format!("{n} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut text = format!("{}: ", s.workload);
    if parts.is_empty() {
        let _ = write!(text, "only {base} ran this workload");
    } else {
        text.push_str(&parts.join("; "));
    }
    if !checks.is_empty() {
        let _ = write!(text, ". Data checksums on against off: {checks}");
    }
    text.push('.');
    text
}

/// How the verdict on checksums on against off reads.
fn checksum_verdict(m: &GeometricMean, t: f64) -> String {
    let way = if m.ratio < 1.0 { "slower" } else { "faster" };
    match m.verdict {
        Verdict::Faster | Verdict::Slower => format!("{way} with them on by more than {t} %"),
        Verdict::Small => format!("{way} with them on by less than {t} %"),
        Verdict::Same => format!("the same within ±{t} %"),
        Verdict::Inconclusive => format!("inconclusive at ±{t} %"),
        Verdict::OneSample => "one sample".into(),
    }
}
