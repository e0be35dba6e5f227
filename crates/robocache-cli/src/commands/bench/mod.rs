//! `robocache bench`: the benchmark harness. On a GPU it times docs/performance.md's
//! workloads and sweeps over batch size and channel count (bf16); on the CPU
//! the shapes `benches/cpu_vs_numpy.py` compares with NumPy (f32). Each call
//! is timed as [`measure`] describes, against the device's measured copy
//! bandwidth, and with `--baseline benches/torch_baseline.py` the PyTorch
//! baseline runs in the same run on the same inputs and checks that it gets
//! the same numbers. Writes `bench.json`, `bench.md` and `bench.svg`.

mod baseline;
mod loader;
mod measure;
mod plot;
mod report;
mod storage;
mod workloads;
mod write_rlds;

use std::path::PathBuf;

use anyhow::{Context, Result};
use robocache::BackendKind;

use report::{Measurement, Report};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to time instead of the operations.
    #[command(subcommand)]
    target: Option<Target>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Timed calls per workload, after 3 warm-up calls (default: 50 on a GPU, 10 on the CPU).
    #[arg(long)]
    repeats: Option<usize>,
    /// Only workloads whose name or id contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Only docs/performance.md's workloads, not the sweeps.
    #[arg(long)]
    no_sweep: bool,
    /// Where bench.json, bench.md and bench.svg are written.
    #[arg(long, default_value = "robocache-bench")]
    out: PathBuf,
    /// Also write the results (the `results` list of bench.json) here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The PyTorch baseline script (benches/torch_baseline.py): run in the same
    /// run on the same inputs (exported under OUT/inputs), compared and timed.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// The Python that runs the baseline (needs PyTorch with CUDA).
    #[arg(long, default_value = "python3")]
    python: String,
    /// Skip torch.compile in the baseline (eager only).
    #[arg(long)]
    no_compile: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Target {
    /// The loader: batches per second, resident and streaming modes, every backend.
    Loader(loader::Args),
    /// A remote store on its own: bytes/s of ranged GETs, N in flight, past the cache.
    Storage(storage::Args),
    /// Writes a synthetic RLDS directory (TFDS's format) for the benchmarks.
    WriteRlds(write_rlds::Args),
}

/// Today's date (UTC) as YYYY-MM-DD.
fn today() -> String {
    let days =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

pub fn run(args: Args) -> Result<()> {
    match args.target {
        Some(Target::Loader(loader)) => return loader::run(loader),
        Some(Target::Storage(storage)) => return storage::run(storage),
        Some(Target::WriteRlds(write)) => return write_rlds::run(write),
        None => {}
    }
    let device = super::open_device(&args.backend)?;
    let gpu = device.kind() == BackendKind::Cuda;
    let backend = device.to_string();
    let repeats = args.repeats.unwrap_or(if gpu { 50 } else { 10 });
    let mut workloads = if gpu { workloads::gpu_workloads() } else { workloads::cpu_workloads() };
    workloads.retain(|w| {
        (!args.no_sweep || w.group == workloads::Group::Spec)
            && args.filter.as_deref().is_none_or(|f| w.name.contains(f) || w.id.contains(f))
    });
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    // The baseline's copy of the inputs: a temporary directory, removed at the end.
    let scratch = tempfile::Builder::new().prefix("robocache-bench-").tempdir()?;
    let inputs_dir = scratch.path().to_path_buf();

    let copy_bytes = if gpu { 1 << 30 } else { 256 << 20 };
    let copy = measure::copy_bandwidth(&device, copy_bytes)?;
    // Rotate over copies of at least 256 MiB in all (five times an H100's L2).
    let rotate_bytes = if gpu { 256 << 20 } else { 0 };
    println!("backend: {backend}; copy bandwidth {:.0} GB/s (read + write, {} MiB)", copy / 1e9, copy_bytes >> 20);
    println!("{:<52} {:>11} {:>9} {:>8} {:>10}", "workload", "median µs", "GB/s", "of copy", "floor µs");
    let mut results = Vec::new();
    for workload in &workloads {
        let sets = measure::rotated_inputs(&device, workload, rotate_bytes)?;
        let times = measure::time_calls(&device, &sets, 3, repeats, &*workload.call)?;
        let m = Measurement::new(workload, &backend, times, copy);
        println!(
            "{:<52} {:>11.1} {:>9.0} {:>7.0}% {:>10.1}",
            m.name,
            m.median_us,
            m.gbytes_per_s,
            100.0 * m.fraction_of_copy,
            m.floor_us
        );
        if args.baseline.is_some() {
            let outputs = (workload.call)(&device, &sets[0])?;
            baseline::export(&inputs_dir, workload, &sets[0], &outputs)?;
        }
        results.push(m);
    }
    if let Some(script) = &args.baseline {
        let found = baseline::run(&args.python, script, &inputs_dir, repeats, !args.no_compile)?;
        for m in &mut results {
            m.baseline = found.get(&m.id).cloned();
        }
    }
    let report = Report {
        device: backend,
        date: today(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        copy_gbytes_per_s: copy / 1e9,
        results,
    };
    let markdown = report::markdown(&report);
    println!("\n{markdown}");
    std::fs::write(args.out.join("bench.json"), serde_json::to_string_pretty(&report)?)?;
    std::fs::write(args.out.join("bench.md"), &markdown)?;
    if report.results.iter().any(|m| m.sweep_x.is_some()) {
        let title = format!("robocache vs PyTorch on {} ({})", report.device, report.date);
        std::fs::write(args.out.join("bench.svg"), plot::svg(&report.results, &title))?;
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report.results)?)?;
    }
    println!("wrote {}", args.out.join("bench.{json,md,svg}").display());
    Ok(())
}
