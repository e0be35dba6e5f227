//! The results: one row per workload, printed as a table and written as JSON
//! and Markdown.

use std::fmt::Write as _;

use serde::Serialize;

use super::baseline::BaselineResult;
use super::measure::Times;
use super::workloads::Group;

/// One workload's result.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub id: String,
    pub name: String,
    pub group: Group,
    pub kind: String,
    pub backend: String,
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub repeats: usize,
    /// Minimum bytes the call reads and writes.
    pub bytes: u64,
    pub gbytes_per_s: f64,
    /// Achieved bandwidth over the measured copy bandwidth.
    pub fraction_of_copy: f64,
    /// `bytes` over the copy bandwidth: no implementation can be faster.
    pub floor_us: f64,
    pub target_us: Option<f64>,
    pub sweep_x: Option<usize>,
    pub baseline: Option<BaselineResult>,
}

impl Measurement {
    pub fn new(
        workload: &super::workloads::Workload,
        backend: &str,
        times: Times,
        copy_bytes_per_s: f64,
    ) -> Measurement {
        let seconds = times.median_us * 1e-6;
        let bytes_per_s = workload.bytes as f64 / seconds;
        Measurement {
            id: workload.id.clone(),
            name: workload.name.clone(),
            group: workload.group,
            kind: workload.kind.into(),
            backend: backend.into(),
            median_us: times.median_us,
            min_us: times.min_us,
            max_us: times.max_us,
            repeats: times.repeats,
            bytes: workload.bytes,
            gbytes_per_s: bytes_per_s / 1e9,
            fraction_of_copy: bytes_per_s / copy_bytes_per_s,
            floor_us: workload.bytes as f64 / copy_bytes_per_s * 1e6,
            target_us: workload.target_us,
            sweep_x: workload.sweep_x,
            baseline: None,
        }
    }

    /// Whether the workload's target is met (None without a target).
    pub fn meets_target(&self) -> Option<bool> {
        self.target_us.map(|t| self.median_us <= t)
    }
}

/// Everything one run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    pub device: String,
    pub date: String,
    pub command: String,
    pub copy_gbytes_per_s: f64,
    pub results: Vec<Measurement>,
}

fn optional(value: Option<f64>) -> String {
    value.map_or("—".into(), |v| format!("{v:.1}"))
}

/// The Markdown table of one group.
pub fn table(results: &[Measurement], group: Group) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| workload | robocache µs | GB/s | of copy | floor µs | eager µs | compile µs | vs compile | target µs | check |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for m in results.iter().filter(|m| m.group == group) {
        let eager = m.baseline.as_ref().and_then(|b| b.eager_us);
        let compile = m.baseline.as_ref().and_then(|b| b.compile_us);
        let best = match (eager, compile) {
            (Some(e), Some(c)) => Some(e.min(c)),
            (e, c) => e.or(c),
        };
        let speedup = best.map_or("—".into(), |b| format!("{:.1}×", b / m.median_us));
        let target = match (m.target_us, m.meets_target()) {
            (Some(t), Some(true)) => format!("{t:.0} ✓"),
            (Some(t), _) => format!("{t:.0} ✗"),
            _ => "—".into(),
        };
        let check = m.baseline.as_ref().map_or("—".to_string(), |b| b.check.clone());
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.0} | {:.0}% | {:.1} | {} | {} | {speedup} | {target} | {check} |",
            m.name,
            m.median_us,
            m.gbytes_per_s,
            100.0 * m.fraction_of_copy,
            m.floor_us,
            optional(eager),
            optional(compile),
        );
    }
    out
}

/// The whole report as Markdown.
pub fn markdown(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Device: {}, {}. Copy bandwidth (read + write): {:.0} GB/s.",
        report.device, report.date, report.copy_gbytes_per_s
    );
    let _ = writeln!(out, "Command: `{}`\n", report.command);
    for (group, title) in [
        (Group::Spec, "Target workloads"),
        (Group::BatchSweep, "Resample bf16 500→250, D=256, over the batch size"),
        (Group::ChannelSweep, "Resample bf16 500→250, B=64, over D"),
        (Group::Latency, "Latency floor: the least a call takes on a cold cache"),
    ] {
        if report.results.iter().any(|m| m.group == group) {
            let _ = writeln!(out, "### {title}\n\n{}", table(&report.results, group));
        }
    }
    out
}
