//! An SVG plot of the sweeps: time per call against the batch size and
//! against the channel count, log-log, for robocache, eager PyTorch,
//! `torch.compile` and the floor (minimum bytes over the copy bandwidth).

use std::fmt::Write as _;

use super::report::Measurement;
use super::workloads::Group;

const PANEL_WIDTH: f64 = 460.0;
const PANEL_HEIGHT: f64 = 340.0;
const MARGIN: f64 = 60.0;

struct Series {
    label: &'static str,
    color: &'static str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

fn series_of(results: &[Measurement], group: Group) -> Vec<Series> {
    let rows: Vec<&Measurement> = results.iter().filter(|m| m.group == group && m.sweep_x.is_some()).collect();
    let x = |m: &Measurement| m.sweep_x.unwrap_or(1) as f64;
    let collect = |value: &dyn Fn(&Measurement) -> Option<f64>| -> Vec<(f64, f64)> {
        rows.iter().filter_map(|m| value(m).filter(|v| *v > 0.0).map(|v| (x(m), v))).collect()
    };
    vec![
        Series { label: "robocache", color: "#1f77b4", dashed: false, points: collect(&|m| Some(m.median_us)) },
        Series {
            label: "PyTorch eager",
            color: "#ff7f0e",
            dashed: false,
            points: collect(&|m| m.baseline.as_ref().and_then(|b| b.eager_us)),
        },
        Series {
            label: "torch.compile",
            color: "#2ca02c",
            dashed: false,
            points: collect(&|m| m.baseline.as_ref().and_then(|b| b.compile_us)),
        },
        Series {
            label: "floor (bytes / copy bandwidth)",
            color: "#7f7f7f",
            dashed: true,
            points: collect(&|m| Some(m.floor_us)),
        },
    ]
}

/// Powers of ten covering `[low, high]`.
fn decades(low: f64, high: f64) -> (f64, f64) {
    (10f64.powf(low.log10().floor()), 10f64.powf(high.log10().ceil()))
}

fn panel(out: &mut String, left: f64, title: &str, x_label: &str, series: &[Series]) {
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    if all.is_empty() {
        return;
    }
    let (x_min, x_max) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y_min, y_max) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (y_low, y_high) = decades(y_min, y_max);
    let (x_low, x_high) = (x_min / 1.5, x_max * 1.5);
    let plot_w = PANEL_WIDTH - 1.3 * MARGIN;
    let plot_h = PANEL_HEIGHT - 2.0 * MARGIN;
    let top = MARGIN;
    let px = |x: f64| left + MARGIN + (x.ln() - x_low.ln()) / (x_high.ln() - x_low.ln()) * plot_w;
    let py = |y: f64| top + plot_h - (y.ln() - y_low.ln()) / (y_high.ln() - y_low.ln()) * plot_h;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="14" text-anchor="middle">{title}</text>"#,
        left + MARGIN + plot_w / 2.0,
        top - 20.0
    );
    let _ = writeln!(
        out,
        r##"<rect x="{}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##,
        left + MARGIN
    );
    let mut decade = y_low;
    while decade <= y_high * 1.0001 {
        let y = py(decade);
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/>"##,
            left + MARGIN,
            left + MARGIN + plot_w
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"#,
            left + MARGIN - 6.0,
            y + 4.0,
            format_value(decade)
        );
        decade *= 10.0;
    }
    let mut xs: Vec<f64> = all.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    for x in xs {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{}" font-size="11" text-anchor="middle">{}</text>"#,
            px(x),
            top + plot_h + 16.0,
            format_value(x)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{x_label}</text>"#,
        left + MARGIN + plot_w / 2.0,
        top + plot_h + 36.0
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle" transform="rotate(-90 {} {})">µs per call</text>"#,
        left + 16.0,
        top + plot_h / 2.0,
        left + 16.0,
        top + plot_h / 2.0
    );
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let path: Vec<String> = s.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        let dash = if s.dashed { r#" stroke-dasharray="5,4""# } else { "" };
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
            path.join(" "),
            s.color
        );
        for &(x, y) in &s.points {
            let _ = writeln!(out, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#, px(x), py(y), s.color);
        }
    }
}

fn format_value(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// The SVG document.
pub fn svg(results: &[Measurement], title: &str) -> String {
    let width = 2.0 * PANEL_WIDTH;
    let height = PANEL_HEIGHT + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(out, r#"<text x="{}" y="20" font-size="15" text-anchor="middle">{title}</text>"#, width / 2.0);
    let batch = series_of(results, Group::BatchSweep);
    let channels = series_of(results, Group::ChannelSweep);
    panel(&mut out, 0.0, "resample bf16 500→250, D=256", "batch size B", &batch);
    panel(&mut out, PANEL_WIDTH, "resample bf16 500→250, B=64", "channels D", &channels);
    for (k, s) in batch.iter().enumerate() {
        let y = PANEL_HEIGHT + 10.0 + 0.0 * k as f64;
        let x = 80.0 + 200.0 * k as f64;
        let dash = if s.dashed { r#" stroke-dasharray="5,4""# } else { "" };
        let _ = writeln!(
            out,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2"{dash}/>"#,
            x + 24.0,
            s.color
        );
        let _ = writeln!(out, r#"<text x="{}" y="{}" font-size="12">{}</text>"#, x + 30.0, y + 4.0, s.label);
    }
    out.push_str("</svg>\n");
    out
}
