//! `robocache inspect PATH [--json] [--verify]`: the layout, episodes,
//! streams, shapes, dtypes, rates and durations of a dataset file or
//! directory (metadata only); with `--verify`, every row of every stream
//! read and checked as well (`Dataset::verify`). ROS 2 bags also get a
//! table of their topics: type, messages, rate, largest gap, time range;
//! with `--decode`, every message of every topic decoded from the
//! definitions the bag carries, and the rate it decoded at.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use robocache::datasets::{ros2, Dataset, DatasetInfo, Format, OpenOptions, Timeline, VerifyReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dataset: an HDF5 file (RoboMimic, CALVIN or RT-X layout), an
    /// RLDS builder directory as TFDS writes it (`bridge/0.1.0`, or
    /// `bridge`), a LeRobot root, or ROS 2 bags (a `.mcap` or `.db3` file,
    /// or a directory of them); local, or a URL (`s3://bucket/...`,
    /// `gs://...`, `az://...`, `https://...`, `hf://datasets/<org>/<name>`).
    file: PathBuf,
    /// Print the whole episode model as JSON instead of a summary.
    #[arg(long)]
    json: bool,
    /// Read as this layout instead of detecting it (robomimic, calvin, rtx, rlds, lerobot, ros2).
    #[arg(long)]
    format: Option<Format>,
    /// Episodes to list in the summary (all with --episodes 0).
    #[arg(long, default_value_t = 10)]
    episodes: usize,
    /// Also read every row of every stream (TFRecord CRC32C, parquet pages,
    /// every video frame decoded, HDF5 datasets) and list what cannot be
    /// read; exits with an error when anything is wrong.
    #[arg(long)]
    verify: bool,
    /// ROS 2 bags: decode every message of every topic with the definitions
    /// the bag carries (one thread), print messages and bytes decoded per
    /// topic and the rate; exits with an error when a message does not decode.
    #[arg(long, conflicts_with = "verify")]
    decode: bool,
    /// Threads reading for --verify (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    open: super::remote::OpenArgs,
}

pub fn run(args: Args) -> Result<()> {
    let options = OpenOptions { format: args.format, ..args.open.options()? };
    let opened = Dataset::open_with(&args.file, &options);
    // Bags: their topics, listed even where the dataset does not open.
    let is_bag = match &opened {
        Ok(dataset) => dataset.info().format == Format::Ros2,
        Err(_) => args.format == Some(Format::Ros2) || args.file.extension().is_some_and(|e| e == "mcap" || e == "db3"),
    };
    let topics = match is_bag {
        true => Some(ros2::topic_stats(&args.file, &options.storage)?),
        false => None,
    };
    if let (Some(topics), false) = (&topics, args.json) {
        super::print_out(&topic_table(topics))?;
    }
    if args.decode {
        let Some(topics) = topics else {
            anyhow::bail!("{}: --decode reads ROS 2 bags (.mcap, .db3), and this is not one", args.file.display());
        };
        return decode(&args, &options, topics);
    }
    let dataset = opened?;
    let info = dataset.info();
    if !args.verify {
        if args.json {
            let json = match topics {
                Some(topics) => serde_json::json!({ "dataset": info, "topics": topics }),
                None => serde_json::to_value(info)?,
            };
            return super::print_out(&format!("{}\n", serde_json::to_string_pretty(&json)?));
        }
        return super::print_out(&summary(info, args.episodes));
    }
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let started = std::time::Instant::now();
    let report = dataset.verify(threads);
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        let both = serde_json::json!({ "dataset": info, "verify": report });
        super::print_out(&format!("{}\n", serde_json::to_string_pretty(&both)?))?;
    } else {
        super::print_out(&format!("{}\n{}", summary(info, args.episodes), verify_summary(&report, seconds)))?;
    }
    if !report.is_ok() {
        anyhow::bail!("{}: {} problem(s) found by --verify", args.file.display(), report.problems.len());
    }
    Ok(())
}

/// `--decode`: every message of every topic decoded, a line per topic and
/// the totals (or JSON), an error when a topic did not decode.
fn decode(args: &Args, options: &OpenOptions, topics: Vec<ros2::TopicStats>) -> Result<()> {
    let started = std::time::Instant::now();
    let decoded = ros2::decode_messages(&args.file, &options.storage, 0)?;
    let seconds = started.elapsed().as_secs_f64();
    let messages: u64 = decoded.iter().map(|t| t.messages).sum();
    let bytes: u64 = decoded.iter().map(|t| t.bytes).sum();
    if args.json {
        let json = serde_json::json!({
            "topics": topics,
            "decode": { "seconds": seconds, "messages": messages, "bytes": bytes, "topics": decoded },
        });
        super::print_out(&format!("{}\n", serde_json::to_string_pretty(&json)?))?;
    } else {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "\n{:<32} {:<36} {:>10} {:>12}  problem", "topic", "type", "decoded", "MB");
        for topic in &decoded {
            let _ = writeln!(
                out,
                "{:<32} {:<36} {:>10} {:>12.2}  {}",
                topic.topic,
                topic.type_name,
                topic.messages,
                topic.bytes as f64 / 1e6,
                topic.error.as_deref().unwrap_or("")
            );
        }
        let _ = writeln!(
            out,
            "decoded {messages} messages ({:.1} MB) in {seconds:.3} s: {:.0} messages/s, {:.1} MB/s",
            bytes as f64 / 1e6,
            messages as f64 / seconds.max(1e-9),
            bytes as f64 / 1e6 / seconds.max(1e-9)
        );
        super::print_out(&out)?;
    }
    let failed: Vec<String> = decoded
        .iter()
        .filter_map(|t| t.error.as_ref().map(|e| format!("{} `{}`: {e}", t.file.display(), t.topic)))
        .collect();
    if !failed.is_empty() {
        anyhow::bail!("{} topic(s) did not decode:\n  {}", failed.len(), failed.join("\n  "));
    }
    Ok(())
}

/// One line per topic of each bag.
fn topic_table(topics: &[ros2::TopicStats]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut file = None;
    for topic in topics {
        if file != Some(&topic.file) {
            file = Some(&topic.file);
            let _ = writeln!(out, "{} ({}):", topic.file.display(), topic.storage);
            let _ = writeln!(
                out,
                "  {:<32} {:<36} {:>8} {:>9} {:>9} {:>17}",
                "topic", "type", "messages", "rate Hz", "max gap s", "time range s"
            );
        }
        let mut notes = String::new();
        if topic.out_of_order > 0 {
            let _ = write!(notes, "  {} out of order", topic.out_of_order);
        }
        if let Some(why) = &topic.not_decodable {
            let _ = write!(notes, "  not decoded: {why}");
        }
        let _ = writeln!(
            out,
            "  {:<32} {:<36} {:>8} {:>9.2} {:>9.3} {:>8.3}..{:<8.3}{notes}",
            topic.topic,
            topic.type_name,
            topic.messages,
            topic.rate_hz,
            topic.largest_gap_s,
            topic.first_s,
            topic.last_s
        );
    }
    out.push('\n');
    out
}

/// What `--verify` read, then each problem on its own line.
fn verify_summary(report: &VerifyReport, seconds: f64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "verify: {} episodes, {} streams, {} rows, {:.1} MB read in {seconds:.1} s: {}",
        report.episodes,
        report.streams,
        report.rows,
        report.bytes as f64 / 1e6,
        if report.is_ok() { "no problems".to_owned() } else { format!("{} problem(s)", report.problems.len()) }
    );
    for problem in &report.problems {
        let _ = writeln!(out, "  {} {}: {}", problem.episode, problem.stream, problem.error);
    }
    out
}

/// The text summary: one line for the file, a table of streams, a table of episodes.
fn summary(info: &DatasetInfo, episodes_listed: usize) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let duration: f64 = info.episodes.iter().map(|e| e.duration_s).sum();
    let _ = writeln!(
        out,
        "{}: {} layout, {} episodes, {} steps, {} Hz step clock, {:.1} s in all",
        info.path.display(),
        info.format,
        info.episodes.len(),
        info.total_steps(),
        info.rate_hz,
        duration
    );
    if !info.splits.is_empty() {
        let _ = writeln!(out, "splits: {}", info.splits.join(", "));
    }
    if let Some(ignored) = info.metadata.get("ignored").and_then(|v| v.as_object()) {
        let _ = writeln!(out, "\nignored (not streams):");
        for (key, why) in ignored {
            let _ = writeln!(out, "  {key}: {}", why.as_str().unwrap_or_default());
        }
    }
    if let Some(warnings) = info.metadata.get("warnings").and_then(|v| v.as_array()) {
        let _ = writeln!(out, "\nwarnings:");
        for warning in warnings {
            let _ = writeln!(out, "  {}", warning.as_str().unwrap_or_default());
        }
    }
    // Streams by name, in first-seen order, with how many episodes have them.
    let mut order: Vec<&str> = Vec::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for episode in &info.episodes {
        for stream in &episode.streams {
            let count = seen.entry(&stream.name).or_insert(0);
            if *count == 0 {
                order.push(&stream.name);
            }
            *count += 1;
        }
    }
    let _ = writeln!(out, "\nstreams:");
    let _ = writeln!(out, "  {:<34} {:<5} {:<14} {:<44} clock", "name", "dtype", "step shape", "kind");
    for name in order {
        let Some(stream) = info.episodes.iter().find_map(|e| e.stream(name)) else { continue };
        let clock = match &stream.timeline {
            Timeline::Uniform { hz, .. } if *hz == info.rate_hz => format!("{hz} Hz"),
            Timeline::Uniform { hz, .. } => format!("{hz} Hz (own clock)"),
            Timeline::Explicit { .. } => "timestamps".to_owned(),
        };
        let coverage = match seen[name] {
            n if n == info.episodes.len() => String::new(),
            n => format!(", in {n} of {} episodes", info.episodes.len()),
        };
        let _ = writeln!(
            out,
            "  {:<34} {:<5} {:<14} {:<44} {clock}{coverage}",
            stream.name,
            stream.dtype.name(),
            format!("{:?}", stream.step_shape),
            stream.kind.to_string()
        );
    }
    let _ = writeln!(out, "\nepisodes:");
    let listed = if episodes_listed == 0 { info.episodes.len() } else { episodes_listed.min(info.episodes.len()) };
    for episode in &info.episodes[..listed] {
        let instruction = episode.instruction.as_deref().map(|i| format!("  \"{i}\"")).unwrap_or_default();
        let _ =
            writeln!(out, "  {:<20} {:>7} steps {:>9.2} s{instruction}", episode.name, episode.len, episode.duration_s);
    }
    if listed < info.episodes.len() {
        let _ = writeln!(out, "  ... {} more (--episodes 0 lists all)", info.episodes.len() - listed);
    }
    out
}
